//! Label selectors as apimachinery has them: `metav1.LabelSelectorAsSelector` turns the API's
//! `LabelSelector` into a validated `labels.Selector`, [`parse`] reads one from its string form
//! (`labels.Parse`, a `?labelSelector=` query), and `Matches` and `String` are here too.
//!
//! Error texts follow upstream's `field.Error` / aggregate formatting (as of the apimachinery
//! that ships `api/validate/content`), because controllers copy them into events and conditions
//! and the API server answers with them.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::golang::{go_atoi, go_json_string_slice, go_quote};
use crate::validation::{aggregate, field_invalid, label_key_errors, label_value_errors};

mod parse;
pub use parse::parse;

/// What a selector is matched against: an object's labels, looked up by key (upstream's
/// `labels.Labels`). An object's `metadata.labels` (`None`: no labels) is one, and so is any
/// compact form a caller keeps labels in, so all are matched by the one `Matches` here.
pub trait LabelSet {
    /// The key's value (`Get`), `None` when the key is absent or its value is no string.
    fn label(&self, key: &str) -> Option<&str>;

    /// Whether the key is present (`Has`), whatever its value.
    fn has(&self, key: &str) -> bool {
        self.label(key).is_some()
    }
}

impl LabelSet for Option<&BTreeMap<String, String>> {
    fn label(&self, key: &str) -> Option<&str> {
        self.and_then(|labels| labels.get(key)).map(String::as_str)
    }
}

impl<L: LabelSet + ?Sized> LabelSet for &L {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }

    fn has(&self, key: &str) -> bool {
        (**self).has(key)
    }
}

/// Why a selector cannot be built, in upstream's words (controllers copy the text into events
/// and conditions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `labels.NewRequirement`'s field errors, aggregated.
    #[error("{0}")]
    Invalid(String),
    #[error("{} is not a valid label selector operator", go_quote(.0))]
    Operator(String),
    /// `labels.Parse`'s syntax errors, and its requirement errors it wraps.
    #[error("{0}")]
    Parse(String),
}

/// A requirement's operator (`selection.Operator`). `LabelSelectorAsSelector` produces
/// `Equals` (from `matchLabels`) and the four of `matchExpressions`; the string form also has
/// `==`, `!=`, `>` and `<`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `=`: the key is present with exactly this value.
    Equals,
    /// `==`, the same as `=`.
    DoubleEquals,
    /// `!=`: the key is absent or has another value.
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// `>`: the key's value is an integer greater than the one given.
    GreaterThan,
    /// `<`: the key's value is an integer less than the one given.
    LessThan,
}

impl Operator {
    /// An expression's operator as the API spells it (`matchExpressions`, scope selectors).
    pub fn of_expression(operator: &str) -> Option<Self> {
        match operator {
            "In" => Some(Self::In),
            "NotIn" => Some(Self::NotIn),
            "Exists" => Some(Self::Exists),
            "DoesNotExist" => Some(Self::DoesNotExist),
            _ => None,
        }
    }
}

/// One validated term of a selector (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement`: validates the key, the value count for the operator, that
    /// `>` and `<` compare with integers, and every value. All problems are reported together,
    /// as upstream aggregates them. An empty `values` is rendered as Go's nil slice (`null`),
    /// which is what `LabelSelectorAsSelector` passes.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        let mut errs = Vec::new();
        let key_errs = label_key_errors(key);
        if !key_errs.is_empty() {
            errs.push(field_invalid("key", &go_quote(key), &key_errs.join("; ")));
        }
        let count_problem = match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            Operator::GreaterThan | Operator::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_problem {
            errs.push(field_invalid(
                "values",
                &go_json_string_slice(&values),
                detail,
            ));
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            for (i, value) in values.iter().enumerate() {
                if go_atoi(value).is_err() {
                    errs.push(field_invalid(
                        &format!("values[{i}]"),
                        &go_quote(value),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
        for (i, value) in values.iter().enumerate() {
            let value_errs = label_value_errors(value);
            if !value_errs.is_empty() {
                // Upstream's path is values.Index(i).Key(key), printed without quoting.
                let path = format!("values[{i}][{key}]");
                errs.push(field_invalid(
                    &path,
                    &go_quote(value),
                    &value_errs.join("; "),
                ));
            }
        }
        if errs.is_empty() {
            Ok(Requirement {
                key: key.to_string(),
                operator,
                values,
            })
        } else {
            Err(SelectorError::Invalid(aggregate(errs)))
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// Values in the order given (Display sorts them, this does not).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `Requirement.Matches`: an absent key satisfies NotIn, `!=` and DoesNotExist only.
    pub fn matches(&self, labels: impl LabelSet) -> bool {
        let value = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|listed| listed == v);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !listed(v)),
            Operator::Exists => labels.has(&self.key),
            Operator::DoesNotExist => !labels.has(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                // Both sides must read as integers, and there must be one value to compare.
                let (Some(have), [want]) = (value.and_then(|v| go_atoi(v).ok()), &self.values[..])
                else {
                    return false;
                };
                let Ok(want) = go_atoi(want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (infix, parens) = match self.operator {
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
            Operator::In => (" in ", true),
            Operator::NotIn => (" notin ", true),
            Operator::Exists => return f.write_str(&self.key),
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
        };
        // Values are sorted on output only, as upstream's safeSort.
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        let joined = values.join(",");
        if parens {
            write!(f, "{}{infix}({joined})", self.key)
        } else {
            write!(f, "{}{infix}{joined}", self.key)
        }
    }
}

/// A validated selector (`labels.Selector` as `LabelSelectorAsSelector` returns it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `labels.Nothing()`: matches no object; what a missing (nil) selector means.
    Nothing,
    /// All must match; sorted by key. Empty is `labels.Everything()`.
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// `labels.Everything()`.
    pub fn everything() -> Self {
        Selector::Requirements(Vec::new())
    }

    /// `Selector.Empty()`: true only for a selector that does not restrict anything.
    /// Nothing is not empty, as upstream (controllers use this to refuse select-all selectors).
    pub fn is_empty(&self) -> bool {
        matches!(self, Selector::Requirements(reqs) if reqs.is_empty())
    }

    /// `Selector.Matches` against an object's labels.
    pub fn matches(&self, labels: impl LabelSet) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(reqs) => reqs.iter().all(|r| r.matches(&labels)),
        }
    }
}

impl fmt::Display for Selector {
    /// `Selector.String()`: both Nothing and Everything print as "" upstream.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Selector::Requirements(reqs) = self else {
            return Ok(());
        };
        for (i, req) in reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{req}")?;
        }
        Ok(())
    }
}

/// `metav1.LabelSelectorAsSelector`.
pub fn from_label_selector(selector: Option<&LabelSelector>) -> Result<Selector, SelectorError> {
    let Some(ps) = selector else {
        return Ok(Selector::Nothing);
    };
    let labels = ps.match_labels.iter().flatten();
    let exprs = ps.match_expressions.as_deref().unwrap_or_default();
    let mut reqs = Vec::with_capacity(labels.clone().count() + exprs.len());
    // Upstream walks a Go map here, so which bad label is reported first is random there;
    // key order makes it deterministic.
    for (k, v) in labels {
        reqs.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
    }
    for expr in exprs {
        let op = Operator::of_expression(&expr.operator)
            .ok_or_else(|| SelectorError::Operator(expr.operator.clone()))?;
        reqs.push(Requirement::new(
            &expr.key,
            op,
            expr.values.clone().unwrap_or_default(),
        )?);
    }
    // Stable, like Go's insertion sort for the small slices selectors have: a matchLabels term
    // stays ahead of an expression on the same key.
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Selector::Requirements(reqs))
}

/// What controllers do with a spec selector: an invalid one selects nothing, like the
/// `if err != nil { return }` paths upstream; a missing one selects nothing too.
pub fn matches(selector: Option<&LabelSelector>, labels: impl LabelSet) -> bool {
    from_label_selector(selector).is_ok_and(|s| s.matches(labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY_REGEX_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
        must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
        '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_REGEX_MSG: &str = "a valid label must be an empty string or consist of \
        alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
        character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
        '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    type Labels = BTreeMap<String, String>;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).expect("test selector JSON")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err_of(v: serde_json::Value) -> String {
        from_label_selector(Some(&sel(v)))
            .expect_err("selector should be invalid")
            .to_string()
    }

    #[test]
    fn non_ascii_keys_are_invalid_and_quoted_readably() {
        assert_eq!(
            err_of(json!({"matchLabels": {"é": "v"}})),
            format!("key: Invalid value: \"é\": name part {KEY_REGEX_MSG}")
        );
    }

    fn string_of(v: serde_json::Value) -> String {
        from_label_selector(Some(&sel(v)))
            .expect("selector should be valid")
            .to_string()
    }

    // Port of apimachinery's TestLabelSelectorAsSelector (pkg/apis/meta/v1/helpers_test.go).
    #[test]
    fn label_selector_as_selector_upstream_cases() {
        let match_labels = json!({"foo": "bar"});
        let match_exprs = json!([{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]);
        let cases: Vec<(Option<LabelSelector>, Result<&str, &str>)> = vec![
            (None, Ok("")),
            (Some(LabelSelector::default()), Ok("")),
            (
                Some(sel(json!({"matchLabels": match_labels}))),
                Ok("foo=bar"),
            ),
            (
                Some(sel(json!({"matchExpressions": match_exprs}))),
                Ok("baz in (norf,qux)"),
            ),
            (
                Some(sel(
                    json!({"matchLabels": match_labels, "matchExpressions": match_exprs}),
                )),
                Ok("baz in (norf,qux),foo=bar"),
            ),
            (
                Some(sel(json!({"matchExpressions": [
                    {"key": "baz", "operator": "Exists", "values": ["qux", "norf"]}
                ]}))),
                Err(
                    "values: Invalid value: [\"qux\",\"norf\"]: values set must be \
                     empty for exists and does not exist",
                ),
            ),
        ];
        for (i, (input, want)) in cases.into_iter().enumerate() {
            let before = input.clone();
            let got = from_label_selector(input.as_ref()).map(|s| s.to_string());
            assert_eq!(input, before, "case {i}: input must not be modified");
            assert_eq!(
                got,
                want.map(str::to_string)
                    .map_err(|e| SelectorError::Invalid(e.to_string())),
                "case {i}"
            );
        }
    }

    #[test]
    fn nil_selector_is_nothing_and_empty_selector_is_everything() {
        let nothing = from_label_selector(None).unwrap();
        assert_eq!(nothing, Selector::Nothing);
        assert!(!nothing.is_empty());
        assert!(!nothing.matches(None));
        assert!(!nothing.matches(Some(&labels(&[]))));
        assert!(!nothing.matches(Some(&labels(&[("a", "b")]))));

        for empty in [
            json!({}),
            json!({"matchLabels": {}}),
            json!({"matchExpressions": []}),
            json!({"matchLabels": {}, "matchExpressions": []}),
        ] {
            let s = from_label_selector(Some(&sel(empty.clone()))).unwrap();
            assert_eq!(s, Selector::everything(), "{empty}");
            assert!(s.is_empty());
            assert_eq!(s.to_string(), "");
            assert!(s.matches(None));
            assert!(s.matches(Some(&labels(&[]))));
            assert!(s.matches(Some(&labels(&[("a", "b")]))));
        }
    }

    #[test]
    fn matching_table() {
        let ab = labels(&[("a", "b")]);
        let ac = labels(&[("a", "c")]);
        let ab_xy = labels(&[("a", "b"), ("x", "y")]);
        let a_empty = labels(&[("a", "")]);
        let other = labels(&[("z", "b")]);
        let prefixed = labels(&[("example.com/a", "b")]);
        let none: Option<&Labels> = None;
        #[rustfmt::skip]
        let cases: Vec<(serde_json::Value, Option<&Labels>, bool)> = vec![
            // matchLabels
            (json!({"matchLabels": {"a": "b"}}), Some(&ab), true),
            (json!({"matchLabels": {"a": "b"}}), Some(&ac), false),
            (json!({"matchLabels": {"a": "b"}}), Some(&other), false),
            (json!({"matchLabels": {"a": "b"}}), none, false),
            (json!({"matchLabels": {"a": "b"}}), Some(&ab_xy), true),
            (json!({"matchLabels": {"a": "b", "x": "y"}}), Some(&ab), false),
            (json!({"matchLabels": {"a": "b", "x": "y"}}), Some(&ab_xy), true),
            (json!({"matchLabels": {"a": ""}}), Some(&a_empty), true),
            (json!({"matchLabels": {"a": ""}}), none, false),
            // In
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}), Some(&ab), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}), Some(&ac), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["c"]}]}), Some(&ab), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}), Some(&other), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}), none, false),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [""]}]}), Some(&a_empty), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [""]}]}), none, false),
            // NotIn: an absent key matches
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}), Some(&ab), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}), Some(&ac), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b", "c"]}]}), Some(&ac), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}), Some(&other), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}), none, true),
            (json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": [""]}]}), Some(&a_empty), false),
            // Exists
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}), Some(&ab), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}), Some(&a_empty), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}]}), Some(&ab), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}), Some(&other), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}), none, false),
            // DoesNotExist: an absent key matches
            (json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}), Some(&ab), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}), Some(&a_empty), false),
            (json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}), Some(&other), true),
            (json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}), none, true),
            // Combinations are ANDed.
            (json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}), Some(&ab_xy), true),
            (json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}), Some(&ab), false),
            (json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}), Some(&ab), true),
            (json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}), Some(&ab), false),
            (json!({"matchExpressions": [
                {"key": "a", "operator": "In", "values": ["b", "c"]},
                {"key": "a", "operator": "NotIn", "values": ["c"]}
            ]}), Some(&ab), true),
            (json!({"matchExpressions": [
                {"key": "a", "operator": "In", "values": ["b", "c"]},
                {"key": "a", "operator": "NotIn", "values": ["c"]}
            ]}), Some(&ac), false),
            // Keys are case-sensitive and prefixed keys are whole keys.
            (json!({"matchLabels": {"A": "b"}}), Some(&ab), false),
            (json!({"matchLabels": {"example.com/a": "b"}}), Some(&ab), false),
            (json!({"matchLabels": {"example.com/a": "b"}}), Some(&prefixed), true),
        ];
        for (i, (selector, lbls, want)) in cases.into_iter().enumerate() {
            let s = from_label_selector(Some(&sel(selector.clone())))
                .unwrap_or_else(|e| panic!("case {i} {selector}: {e}"));
            assert_eq!(s.matches(lbls), want, "case {i}: {selector} vs {lbls:?}");
            assert_eq!(
                matches(Some(&sel(selector.clone())), lbls),
                want,
                "case {i} (free fn): {selector} vs {lbls:?}"
            );
        }
    }

    #[test]
    fn invalid_operator() {
        for (expression, want) in [
            (
                json!({"key": "a", "operator": "Seriously"}),
                r#""Seriously" is not a valid label selector operator"#,
            ),
            // Operators are case-sensitive; "" is also unknown.
            (
                json!({"key": "a", "operator": "in", "values": ["b"]}),
                r#""in" is not a valid label selector operator"#,
            ),
            (
                json!({"key": "a", "operator": ""}),
                r#""" is not a valid label selector operator"#,
            ),
            // Gt/Lt exist in labels.Parse but not in LabelSelector.
            (
                json!({"key": "a", "operator": "Gt", "values": ["1"]}),
                r#""Gt" is not a valid label selector operator"#,
            ),
            // The operator check comes before validating the key.
            (
                json!({"key": "", "operator": "Nope"}),
                r#""Nope" is not a valid label selector operator"#,
            ),
        ] {
            assert_eq!(err_of(json!({ "matchExpressions": [expression] })), want);
        }
    }

    #[test]
    fn in_and_notin_need_values() {
        let want = "values: Invalid value: null: for 'in', 'notin' operators, values set \
                    can't be empty";
        for op in ["In", "NotIn"] {
            assert_eq!(
                err_of(json!({"matchExpressions": [{"key": "a", "operator": op}]})),
                want
            );
            assert_eq!(
                err_of(json!({"matchExpressions": [{"key": "a", "operator": op, "values": []}]})),
                want
            );
        }
        // The free fn treats it as selecting nothing.
        let bad = sel(json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}));
        assert!(!matches(Some(&bad), None));
        assert!(!matches(Some(&bad), Some(&labels(&[("a", "b")]))));
    }

    #[test]
    fn exists_and_doesnotexist_take_no_values() {
        for op in ["Exists", "DoesNotExist"] {
            assert_eq!(
                err_of(
                    json!({"matchExpressions": [{"key": "a", "operator": op, "values": ["x"]}]})
                ),
                "values: Invalid value: [\"x\"]: values set must be empty for exists and \
                 does not exist"
            );
        }
    }

    #[test]
    fn invalid_keys() {
        let key_err = |key: &str| err_of(json!({"matchLabels": {key: "v"}}));
        assert_eq!(
            key_err("a b"),
            format!("key: Invalid value: \"a b\": name part {KEY_REGEX_MSG}")
        );
        assert_eq!(
            key_err(""),
            format!(
                "key: Invalid value: \"\": name part must be non-empty; name part {KEY_REGEX_MSG}"
            )
        );
        assert_eq!(
            key_err("-a"),
            format!("key: Invalid value: \"-a\": name part {KEY_REGEX_MSG}")
        );
        let long = "a".repeat(64);
        assert_eq!(
            key_err(&long),
            format!("key: Invalid value: \"{long}\": name part must be no more than 63 bytes")
        );
        assert_eq!(
            key_err("/a"),
            "key: Invalid value: \"/a\": prefix part must be non-empty"
        );
        assert_eq!(
            key_err("example.com/"),
            format!(
                "key: Invalid value: \"example.com/\": name part must be non-empty; name part \
                 {KEY_REGEX_MSG}"
            )
        );
        let dns_msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                       characters, '-' or '.', and must start and end with an alphanumeric \
                       character (e.g. 'example.com', regex used for validation is \
                       '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        assert_eq!(
            key_err("Example.com/a"),
            format!("key: Invalid value: \"Example.com/a\": prefix part {dns_msg}")
        );
        assert_eq!(
            key_err("example..com/a"),
            format!("key: Invalid value: \"example..com/a\": prefix part {dns_msg}")
        );
        let long_prefix = format!("{}/a", "a".repeat(254));
        assert_eq!(
            key_err(&long_prefix),
            format!(
                "key: Invalid value: \"{long_prefix}\": prefix part must be no more than 253 bytes"
            )
        );
        assert_eq!(
            key_err("a/b/c"),
            format!(
                "key: Invalid value: \"a/b/c\": a valid label key {KEY_REGEX_MSG} with an \
                 optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )
        );
        // Expression keys are validated the same way.
        assert_eq!(
            err_of(json!({"matchExpressions": [{"key": "a\tb", "operator": "Exists"}]})),
            format!("key: Invalid value: \"a\\tb\": name part {KEY_REGEX_MSG}")
        );
    }

    #[test]
    fn valid_keys_and_values() {
        let name63 = "a".repeat(63);
        let prefix253 = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(prefix253.len(), 253);
        for key in [
            "a",
            "A",
            "0",
            "a-b_c.d",
            "MyName",
            "example.com/MyName",
            "k8s.io/a",
            "app.kubernetes.io/name",
            name63.as_str(),
            &format!("{prefix253}/{name63}"),
        ] {
            for value in ["", "v", "V-1_2.3", name63.as_str()] {
                let s = sel(json!({"matchLabels": {key: value}}));
                let got = from_label_selector(Some(&s));
                assert!(got.is_ok(), "{key:?}={value:?}: {got:?}");
                assert!(matches(Some(&s), Some(&labels(&[(key, value)]))));
            }
        }
    }

    #[test]
    fn invalid_values() {
        assert_eq!(
            err_of(json!({"matchLabels": {"foo": "bar baz"}})),
            format!("values[0][foo]: Invalid value: \"bar baz\": {VALUE_REGEX_MSG}")
        );
        let long = "v".repeat(64);
        assert_eq!(
            err_of(json!({"matchLabels": {"foo": long}})),
            format!("values[0][foo]: Invalid value: \"{long}\": must be no more than 63 bytes")
        );
        let long_bad = format!("{}-", "v".repeat(64));
        assert_eq!(
            err_of(json!({"matchLabels": {"foo": long_bad}})),
            format!(
                "values[0][foo]: Invalid value: \"{long_bad}\": must be no more than 63 bytes; \
                 {VALUE_REGEX_MSG}"
            )
        );
        assert_eq!(
            err_of(json!({"matchExpressions": [
                {"key": "foo", "operator": "In", "values": ["ok", "_bad", "fine", "bad\n"]}
            ]})),
            format!(
                "[values[1][foo]: Invalid value: \"_bad\": {VALUE_REGEX_MSG}, values[3][foo]: \
                 Invalid value: \"bad\\n\": {VALUE_REGEX_MSG}]"
            )
        );
    }

    #[test]
    fn several_errors_are_aggregated_and_deduplicated() {
        assert_eq!(
            err_of(json!({"matchExpressions": [{"key": "", "operator": "In"}]})),
            format!(
                "[key: Invalid value: \"\": name part must be non-empty; name part \
                 {KEY_REGEX_MSG}, values: Invalid value: null: for 'in', 'notin' \
                 operators, values set can't be empty]"
            )
        );
        // A repeated bad value is reported per index: the paths differ, so nothing collapses.
        let r = Requirement::new("k", Operator::In, vec!["-".into(), "-".into()]);
        assert_eq!(
            r,
            Err(SelectorError::Invalid(format!(
                "[values[0][k]: Invalid value: \"-\": {VALUE_REGEX_MSG}, values[1][k]: Invalid \
                 value: \"-\": {VALUE_REGEX_MSG}]"
            )))
        );
        assert_eq!(
            Requirement::new("k", Operator::Equals, vec![]),
            Err(SelectorError::Invalid(
                "values: Invalid value: null: exact-match compatibility requires one \
                 single value"
                    .to_string()
            ))
        );
        assert_eq!(
            aggregate(vec!["x".into(), "y".into(), "x".into()]),
            "[x, y]".to_string()
        );
        assert_eq!(aggregate(vec!["x".into(), "x".into()]), "x".to_string());
    }

    #[test]
    fn first_invalid_term_is_reported() {
        // matchLabels are converted before matchExpressions.
        assert_eq!(
            err_of(json!({
                "matchLabels": {"ok": "fine", "zz": "bad value"},
                "matchExpressions": [{"key": "a", "operator": "Bogus"}]
            })),
            format!("values[0][zz]: Invalid value: \"bad value\": {VALUE_REGEX_MSG}")
        );
        assert_eq!(
            err_of(json!({"matchExpressions": [
                {"key": "a", "operator": "Exists"},
                {"key": "b", "operator": "Bogus"},
                {"key": "c", "operator": "In"}
            ]})),
            "\"Bogus\" is not a valid label selector operator"
        );
    }

    #[test]
    fn display_sorts_keys_and_values() {
        assert_eq!(
            string_of(json!({
                "matchLabels": {"zeta": "1", "alpha": "2"},
                "matchExpressions": [
                    {"key": "mid", "operator": "NotIn", "values": ["c", "a", "b"]},
                    {"key": "beta", "operator": "DoesNotExist"},
                    {"key": "gamma", "operator": "Exists"},
                    {"key": "delta", "operator": "In", "values": ["only"]},
                    {"key": "Upper", "operator": "In", "values": ["y", "X", "x"]}
                ]
            })),
            "Upper in (X,x,y),alpha=2,!beta,delta in (only),gamma,mid notin (a,b,c),zeta=1"
        );
        // Equal keys keep their order: matchLabels first, then expressions as written.
        assert_eq!(
            string_of(json!({
                "matchLabels": {"a": "b"},
                "matchExpressions": [
                    {"key": "a", "operator": "NotIn", "values": ["c"]},
                    {"key": "a", "operator": "Exists"}
                ]
            })),
            "a=b,a notin (c),a"
        );
        assert_eq!(string_of(json!({"matchLabels": {"a": ""}})), "a=");
        assert_eq!(
            string_of(
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["", "b"]}]})
            ),
            "a in (,b)"
        );
        assert_eq!(
            string_of(json!({"matchLabels": {"example.com/app": "web"}})),
            "example.com/app=web"
        );
    }

    #[test]
    fn requirement_accessors_keep_input_order() {
        let s = from_label_selector(Some(&sel(json!({"matchExpressions": [
            {"key": "k", "operator": "In", "values": ["b", "a"]}
        ]}))))
        .unwrap();
        let Selector::Requirements(reqs) = &s else {
            panic!("expected requirements");
        };
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].key(), "k");
        assert_eq!(reqs[0].operator(), Operator::In);
        assert_eq!(reqs[0].values(), ["b".to_string(), "a".to_string()]);
        assert_eq!(reqs[0].to_string(), "k in (a,b)");
    }

    #[test]
    fn free_fn_on_nil_and_valid() {
        assert!(!matches(None, None));
        assert!(!matches(None, Some(&labels(&[("a", "b")]))));
        assert!(matches(Some(&LabelSelector::default()), None));
        let s = sel(json!({"matchLabels": {"a": "b"}}));
        assert!(matches(Some(&s), Some(&labels(&[("a", "b")]))));
        assert!(!matches(Some(&s), Some(&labels(&[("a", "c")]))));
    }
}
