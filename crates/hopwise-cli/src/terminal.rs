//! Text from models, datasets and servers, made safe for a terminal. A model answer or a backend's
//! error body can hold escape sequences that would recolour, retitle or clear the user's terminal
//! (or hide text); every control character but newline and tab is shown as a visible `\u{..}` escape
//! instead, and so are the bidirectional overrides that can make text read differently than it is.

use std::borrow::Cow;

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character escaped; borrowed when there is none.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars().map(|c| if is_unsafe(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn escapes_become_visible_and_plain_text_is_untouched() {
        assert_eq!(safe("Rush\n\tNeil Peart"), "Rush\n\tNeil Peart");
        assert!(matches!(safe("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(safe("\u{1b}[2Jgone"), "\\u{1b}[2Jgone");
        assert_eq!(safe("a\u{7}\u{9b}31m\r\u{202e}b"), "a\\u{7}\\u{9b}31m\\u{d}\\u{202e}b");
    }
}
