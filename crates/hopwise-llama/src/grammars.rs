//! The grammars live in `hopwise_core::grammars`; re-exported here for the backend's users.

pub use hopwise_core::grammars::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammars_are_found_by_name() {
        assert_eq!(by_name("edges"), Some(EDGES));
        assert_eq!(by_name("numbered_questions"), Some(NUMBERED_QUESTIONS));
        assert_eq!(by_name("json"), None);
    }
}
