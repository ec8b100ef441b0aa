//! apimachinery's name rules (`api/validate/content`: label keys and values, DNS-1123
//! subdomains) with their messages, and `field.ErrorList`'s way of printing what fails them.
//! The `*_errors` functions return upstream's messages in its order, one per failed rule, for
//! the selectors' field errors; the `is_*` ones say whether a name passes.

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
                             start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric \
                               characters, '-', '_' or '.', and must start and end with an \
                               alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
                                     alphanumeric characters, '-' or '.', and must start and end \
                                     with an alphanumeric character";
const LABEL_MAX_LEN: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

/// `validation.IsQualifiedName`: a label key, with its optional DNS subdomain prefix.
pub fn is_qualified_name(value: &str) -> bool {
    label_key_errors(value).is_empty()
}

/// `content.IsLabelKey` (a.k.a. IsQualifiedName): optional DNS subdomain prefix and '/'.
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' \
                 (e.g. 'example.com/MyName')",
                label_key_regex_error()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX_LEN {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX_LEN)));
    }
    // Not an else: upstream reports the regex failure even for an empty name.
    if !is_label_name(name) {
        errs.push(format!("name part {}", label_key_regex_error()));
    }
    errs
}

/// The label key pattern's [`regex_error`], with upstream's examples.
fn label_key_regex_error() -> String {
    regex_error(
        LABEL_KEY_ERR,
        LABEL_KEY_FMT,
        &["MyName", "my.name", "123-abc"],
    )
}

/// `content.IsLabelValue`: empty is allowed.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX_LEN {
        errs.push(max_len_error(LABEL_MAX_LEN));
    }
    if !value.is_empty() && !is_label_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Whether `value` is a DNS-1123 subdomain: the names of most objects (pods, leases) are, so
/// a reference with another name cannot name one, and is better not put in a request path.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    dns1123_subdomain_errors(value).is_empty()
}

/// `content.IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !value.split('.').all(is_dns1123_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, on bytes as Go's regexp does for ASCII classes.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.
fn is_dns1123_label(s: &str) -> bool {
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

// --- upstream message formatting ---

/// `content.MaxLenError`.
fn max_len_error(len: usize) -> String {
    format!("must be no more than {len} bytes")
}

/// `content.RegexError`, including its odd "',  or '" spacing.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(ex);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(re);
    out.push_str("')");
    out
}

/// `field.Invalid(path, value, detail).Error()`; `bad` is already Go-formatted.
pub(crate) fn field_invalid(path: &str, bad: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {bad}: {detail}")
}

/// `ErrorList.ToAggregate().Error()`: duplicates dropped, several wrapped in brackets.
pub(crate) fn aggregate(errs: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.len() == 1 {
        unique.pop().unwrap_or_default()
    } else {
        format!("[{}]", unique.join(", "))
    }
}
