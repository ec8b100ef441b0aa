//! Go's renderings of values, and `strconv`'s parsing, so error messages, events and flags read
//! as upstream's: `%q` of a string, `%v` and `json.Marshal` of a `[]string`, `%v` of the API
//! types upstream embeds, `strconv.Atoi` and `strconv.ParseBool`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Go's `strconv.Quote` (`%q`). Printability (`strconv.IsPrint`) is approximated: controls,
/// non-ASCII spaces, the format characters (Unicode category Cf) and private use are escaped.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0B}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7F}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if go_printable(c) => out.push(c),
            c if (c as u32) > 0xFFFF => out.push_str(&format!("\\U{:08x}", c as u32)),
            c => out.push_str(&format!("\\u{:04x}", c as u32)),
        }
    }
    out.push('"');
    out
}

fn go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(
            c,
            '\u{AD}'
                | '\u{600}'..='\u{605}'
                | '\u{61C}'
                | '\u{6DD}'
                | '\u{70F}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E000}'..='\u{F8FF}'
                | '\u{F0000}'..
        ))
}

/// fmt's `%v` of a `[]string`: `[a b]`, elements unquoted; nil and empty alike give `[]`. The
/// generated `String()` of the API types prints their slices so (`LabelSelectorRequirement`'s
/// `Values`).
pub fn go_fmt_string_slice(values: &[String]) -> String {
    format!("[{}]", values.join(" "))
}

/// encoding/json's `json.Marshal` of a `[]string`: `["a","b"]`, each string escaped as Go
/// escapes it (`<`, `>`, `&`, U+2028 and U+2029 too). Empty is printed as the nil slice,
/// `null`, which is what the callers hold when they have no values (`labels.NewRequirement`
/// gets `append([]string(nil), values...)`). `field.Error` prints a `[]string` bad value so
/// (apimachinery's `ErrorBody`, since v0.34).
pub fn go_json_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let mut out = String::from("[");
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in value.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{08}' => out.push_str("\\b"),
                '\u{0C}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20
                    || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') =>
                {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push(']');
    out
}

/// Go's `%v` of a `*metav1.LabelSelector`: its generated `String()` (gogo protobuf) in
/// apimachinery's `generated.pb.go`. `nil` for no selector; match labels sorted by key,
/// values unquoted; each requirement without its leading `&`; empty parts as `{}`.
pub fn go_label_selector(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "nil".into();
    };
    let mut out = String::from("&LabelSelector{MatchLabels:map[string]string{");
    // A BTreeMap iterates in key order, as the generated method sorts its keys.
    for (key, value) in selector.match_labels.iter().flatten() {
        out.push_str(&format!("{key}: {value},"));
    }
    out.push_str("},MatchExpressions:[]LabelSelectorRequirement{");
    for req in selector.match_expressions.iter().flatten() {
        out.push_str(&format!(
            "LabelSelectorRequirement{{Key:{},Operator:{},Values:{},}},",
            req.key,
            req.operator,
            go_fmt_string_slice(req.values.as_deref().unwrap_or_default())
        ));
    }
    out.push_str("},}");
    out
}

/// `strconv.Atoi` on a 64-bit platform (also `strconv.ParseInt(s, 10, 64)`, which accepts the
/// same text): an optional sign and decimal digits, nothing else.
pub fn go_atoi(s: &str) -> Result<i64, AtoiError> {
    s.parse::<i64>().map_err(|e| AtoiError {
        input: s.to_string(),
        out_of_range: matches!(
            e.kind(),
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
        ),
    })
}

/// `strconv.Atoi`'s error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strconv.Atoi: parsing {}: {}", go_quote(.input), if *.out_of_range { "value out of range" } else { "invalid syntax" })]
pub struct AtoiError {
    input: String,
    out_of_range: bool,
}

/// Go's `strconv.ParseBool`, which pflag uses for boolean flags and feature gates.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn go_label_selector_matches_the_generated_string_method() {
        assert_eq!(go_label_selector(None), "nil");
        assert_eq!(
            go_label_selector(Some(&selector(serde_json::json!({})))),
            "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
        assert_eq!(
            go_label_selector(Some(&selector(
                serde_json::json!({ "matchLabels": { "app": "web" } })
            ))),
            "&LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}"
        );
        assert_eq!(
            go_label_selector(Some(&selector(serde_json::json!({
                "matchLabels": { "z": "1", "a.b/c": "x y", "m": "" },
                "matchExpressions": [
                    { "key": "tier", "operator": "In", "values": ["a", "b"] },
                    { "key": "gone", "operator": "DoesNotExist" },
                    { "key": "e", "operator": "NotIn", "values": [] },
                ],
            })))),
            "&LabelSelector{MatchLabels:map[string]string{a.b/c: x y,m: ,z: 1,},MatchExpressions:[]LabelSelectorRequirement{\
LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},\
LabelSelectorRequirement{Key:gone,Operator:DoesNotExist,Values:[],},\
LabelSelectorRequirement{Key:e,Operator:NotIn,Values:[],},},}"
        );
    }

    #[test]
    fn go_json_string_slice_matches_json_marshal() {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(go_json_string_slice(&[]), "null");
        assert_eq!(
            go_json_string_slice(&strings(&["qux", "norf"])),
            r#"["qux","norf"]"#
        );
        assert_eq!(go_json_string_slice(&strings(&[""])), r#"[""]"#);
        // Controls are escaped, DEL is not.
        assert_eq!(
            go_json_string_slice(&strings(&["a\"b\\c", "\u{08}\u{0C}\n\r\t\u{01}\u{7F}"])),
            "[\"a\\\"b\\\\c\",\"\\b\\f\\n\\r\\t\\u0001\u{7F}\"]"
        );
        assert_eq!(
            go_json_string_slice(&strings(&["<a&b>", "\u{2028}\u{2029}", "héllo 日本 😀"])),
            r#"["\u003ca\u0026b\u003e","\u2028\u2029","héllo 日本 😀"]"#
        );
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote("plain"), "\"plain\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            go_quote("\u{07}\u{08}\u{0C}\n\r\t\u{0B}"),
            "\"\\a\\b\\f\\n\\r\\t\\v\""
        );
        assert_eq!(go_quote("\u{00}\u{1B}\u{7F}"), "\"\\x00\\x1b\\x7f\"");
        assert_eq!(go_quote("héllo 日本"), "\"héllo 日本\"");
        assert_eq!(
            go_quote("\u{A0}\u{200B}\u{FEFF}"),
            "\"\\u00a0\\u200b\\ufeff\""
        );
        assert_eq!(go_quote("\u{85}"), "\"\\u0085\"");
        assert_eq!(go_quote("\u{F0000}"), "\"\\U000f0000\"");
        assert_eq!(go_quote("😀"), "\"😀\"");
    }
}
