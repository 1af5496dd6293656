//! One declaration per setting of a config section: [`section!`] takes each setting once (its doc,
//! its file key and type, its default, and how a flag and an environment variable set it) and makes
//! from it the section's struct (read from the file), its overrides (clap arguments the CLI flattens,
//! typed), the merge of the two, and the reference table of `docs/configuration.md`.

/// How a flag's value lands in its config field: the field takes it, or `Some` of it.
pub trait Setting<F> {
    fn set(&mut self, value: &F);
}

impl<T: Clone> Setting<T> for T {
    fn set(&mut self, value: &T) {
        *self = value.clone();
    }
}

impl<T: Clone> Setting<T> for Option<T> {
    fn set(&mut self, value: &T) {
        *self = Some(value.clone());
    }
}

/// Whether a flag value means "not given": an environment variable set to nothing arrives as an
/// empty string, which leaves the file's value in place.
pub trait FlagValue {
    fn is_blank(&self) -> bool {
        false
    }
}

impl FlagValue for String {
    fn is_blank(&self) -> bool {
        self.trim().is_empty()
    }
}

/// A path flag's parser that lets an empty environment variable through (clap's own refuses it),
/// so that, as for text settings, it leaves the file's value.
pub fn path_or_blank(value: &str) -> Result<std::path::PathBuf, std::convert::Infallible> {
    Ok(std::path::PathBuf::from(value))
}

impl FlagValue for std::path::PathBuf {
    fn is_blank(&self) -> bool {
        self.as_os_str().is_empty()
    }
}

macro_rules! plain_flag_values {
    ($($t:ty),*) => { $(impl FlagValue for $t {})* };
}
plain_flag_values!(u32, u64, usize, f64, bool);

/// One setting of a section, for the reference table.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The field name, which is the file key (`[serve] bind`).
    pub name: &'static str,
    /// Its doc comment, lines joined.
    pub doc: &'static str,
    /// Its `#[serde(...)]` attribute's arguments, if any (`skip`: no file key, flag or variable only).
    pub serde: &'static str,
}

impl Key {
    /// Whether the file may set it.
    pub fn in_file(&self) -> bool {
        !self.serde.split(|c: char| !c.is_alphanumeric() && c != '_').any(|word| word == "skip")
    }
}

/// A section's reference table: key, default, flag, environment variable, meaning. The flag and the
/// variable are read from the overrides' clap arguments, the defaults from the section's `Default`
/// as the file would spell them. `section` is empty for top-level keys.
pub fn reference_table(section: &str, keys: &[Key], defaults: &toml::Table, args: &clap::Command) -> String {
    let mut out = String::from("| key | default | flag | environment | meaning |\n|---|---|---|---|---|\n");
    for key in keys {
        let arg = args.get_arguments().find(|a| a.get_id().as_str() == key.name);
        let flag = arg.and_then(|a| a.get_long()).map(|l| format!("`--{l}`")).unwrap_or_else(|| "–".into());
        let env =
            arg.and_then(|a| a.get_env()).map(|e| format!("`{}`", e.to_string_lossy())).unwrap_or_else(|| "–".into());
        let default = defaults.get(key.name).map(|v| format!("`{v}`")).unwrap_or_else(|| "–".into());
        let paragraph = key.doc.split("\n\n").next().unwrap_or_default();
        let meaning = paragraph.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
        let name = match (key.in_file(), section) {
            (false, _) => "– (flag or variable only)".into(),
            (true, "") => format!("`{}`", key.name),
            (true, section) => format!("`{section}.{}`", key.name),
        };
        out.push_str(&format!("| {name} | {default} | {flag} | {env} | {meaning} |\n"));
    }
    out
}

/// A table of flags with no file key of their own: flag, environment variable, meaning (their
/// help's first paragraph).
pub fn flag_table(args: &clap::Command) -> String {
    let mut out = String::from("| flag | environment | meaning |\n|---|---|---|\n");
    for arg in args.get_arguments() {
        let flag = arg.get_long().map(|l| format!("`--{l}`")).unwrap_or_else(|| "–".into());
        let env = arg.get_env().map(|e| format!("`{}`", e.to_string_lossy())).unwrap_or_else(|| "–".into());
        let help = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
        let paragraph = help.split("\n\n").next().unwrap_or_default();
        let meaning = paragraph.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
        out.push_str(&format!("| {flag} | {env} | {meaning} |\n"));
    }
    out
}

/// Declares a config section once. Each setting is
///
/// ```text
/// /// What it does (the file's doc, the flag's help and the reference table's text).
/// #[arg(long = "bind", env = "HOPWISE_SERVE_BIND")]     // or #[arg(skip)]: file only
/// bind: String => String = "127.0.0.1:8080".into(),     // field type => flag type = default
/// ```
///
/// and a field may carry `#[serde(...)]` (e.g. `skip` for a secret that only a flag or variable
/// sets). The struct's own `#[serde(...)]` comes first: `default, deny_unknown_fields` for a
/// `[section]`, `default` for a group of top-level keys (flattened into `Config`, which checks its
/// keys itself). The section gets `Default`, `merge(&Overrides)`, and `KEYS` for
/// [`reference_table`].
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        #[serde($($sattr:tt)*)]
        pub struct $name:ident / $overrides:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])?
                #[arg($($arg:tt)*)]
                $field:ident : $ty:ty => $fty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde($($sattr)*)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        #[doc = concat!("Flag and environment values for [`", stringify!($name), "`]; `None` (or an empty variable) leaves the file's value.")]
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct $overrides {
            $(
                $(#[doc = $doc])*
                #[arg($($arg)*)]
                pub $field: Option<$fty>,
            )*
        }

        impl $name {
            /// Every setting of the section, in declaration order.
            pub const KEYS: &'static [$crate::settings::Key] = &[
                $($crate::settings::Key {
                    name: stringify!($field),
                    doc: concat!($($doc, "\n"),*),
                    serde: stringify!($($($serde)*)?),
                },)*
            ];

            /// Takes every value the overrides carry.
            pub(crate) fn merge(&mut self, o: &$overrides) {
                use $crate::settings::{FlagValue, Setting};
                $(
                    if let Some(value) = o.$field.as_ref().filter(|v| !v.is_blank()) {
                        Setting::<$fty>::set(&mut self.$field, value);
                    }
                )*
            }
        }
    };
}

pub(crate) use section;
