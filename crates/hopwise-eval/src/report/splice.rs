//! Puts the generated section between its marker comments, leaving the rest of the document as
//! it was.

pub const BEGIN: &str = "<!-- results:begin -->";
pub const END: &str = "<!-- results:end -->";

/// How the section got into the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Replaced what stood between the markers.
    Replaced,
    /// The document had no markers: the section was appended, with them.
    Appended,
}

/// Returns `document` with `section` between the markers. A document with one marker but not the
/// other, markers out of order, or a marker twice is refused: guessing there could eat hand-written
/// text.
pub fn splice(document: &str, section: &str) -> Result<(String, Placement), String> {
    let begins: Vec<usize> = document.match_indices(BEGIN).map(|(i, _)| i).collect();
    let ends: Vec<usize> = document.match_indices(END).map(|(i, _)| i).collect();
    let block = format!("{BEGIN}\n{}\n{END}", section.trim_end());
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => {
            let mut out = document.trim_end().to_string();
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&block);
            out.push('\n');
            Ok((out, Placement::Appended))
        }
        ([b], [e]) if b < e => {
            let mut out = String::with_capacity(document.len() + section.len());
            out.push_str(&document[..*b]);
            out.push_str(&block);
            out.push_str(&document[e + END.len()..]);
            Ok((out, Placement::Replaced))
        }
        _ => Err(format!(
            "expected exactly one `{BEGIN}` followed by one `{END}`, found {} and {}{}",
            begins.len(),
            ends.len(),
            if begins.len() == 1 && ends.len() == 1 { " in the wrong order" } else { "" }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_between_the_markers() {
        let doc = format!("# Evaluation\n\nintro\n\n{BEGIN}\nold table\n{END}\n\n## Older section\nkept\n");
        let (out, how) = splice(&doc, "new table\n").expect("splice");
        assert_eq!(how, Placement::Replaced);
        assert_eq!(out, format!("# Evaluation\n\nintro\n\n{BEGIN}\nnew table\n{END}\n\n## Older section\nkept\n"));
        let (again, _) = splice(&out, "new table\n").expect("splice");
        assert_eq!(again, out, "idempotent");
    }

    #[test]
    fn appends_when_there_are_no_markers() {
        let (out, how) = splice("# Evaluation\n", "t").expect("splice");
        assert_eq!(how, Placement::Appended);
        assert_eq!(out, format!("# Evaluation\n\n{BEGIN}\nt\n{END}\n"));
        assert_eq!(splice("", "t").expect("empty").0, format!("{BEGIN}\nt\n{END}\n"));
    }

    #[test]
    fn broken_markers_are_refused() {
        assert!(splice(&format!("{BEGIN}\nx\n"), "t").is_err());
        assert!(splice(&format!("{END}\n{BEGIN}\n"), "t").expect_err("order").contains("wrong order"));
        assert!(splice(&format!("{BEGIN}{END}{BEGIN}{END}"), "t").is_err());
    }
}
