//! Property tests (proptest; cargo-fuzz needs nightly) against kcm's public library API:
//! Quantity parsing, formatting and arithmetic, label selectors, the PDB budget, the TTL
//! hysteresis state machine and generated ResourceClaim names. Each property is checked
//! against a reference computed independently here (exact i128 arithmetic, brute-force
//! selector semantics, the structural rules of apimachinery's canonical form), never against
//! the code under test itself. No failure files are persisted.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kcm::controllers::disruption::plan::budget::{
    BOTH_SET, DISRUPTION_ALLOWED_CONDITION, INSUFFICIENT_PODS_REASON, SUFFICIENT_PODS_REASON,
    SYNC_FAILED_REASON, expected_and_desired, fail_safe_status, needs_controller_scale, new_status,
    scaled_value,
};
use kcm::controllers::resourceclaim::plan::claims::generate_name;
use kcm::controllers::ttl::plan::{
    BOUNDARIES, Decision, TTL_ANNOTATION, TtlState, annotation_patch, decide,
};
use kcm::k8s::quantity::{Format, Quantity};
use kcm::k8s::selector::{self, Selector, from_label_selector};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

/// `cases` runs per property, and no `proptest-regressions/` files in the repository.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

// =============================================================================================
// Quantity
// =============================================================================================

const UNIT: i128 = 1_000_000_000;

/// Suffixes with the exact number of nanos one mantissa unit stands for, and the format the
/// parser must report.
const QUANTITY_SUFFIXES: &[(&str, i128, Format)] = &[
    ("n", 1, Format::DecimalSI),
    ("u", 1_000, Format::DecimalSI),
    ("m", 1_000_000, Format::DecimalSI),
    ("", UNIT, Format::DecimalSI),
    ("k", 1_000 * UNIT, Format::DecimalSI),
    ("M", 1_000_000 * UNIT, Format::DecimalSI),
    ("G", 1_000_000_000 * UNIT, Format::DecimalSI),
    ("Ki", 1024 * UNIT, Format::BinarySI),
    ("Mi", (1 << 20) * UNIT, Format::BinarySI),
    ("Gi", (1 << 30) * UNIT, Format::BinarySI),
    ("e3", 1_000 * UNIT, Format::DecimalExponent),
    ("e-3", 1_000_000, Format::DecimalExponent),
    ("E6", 1_000_000 * UNIT, Format::DecimalExponent),
    ("e0", UNIT, Format::DecimalExponent),
    ("e-9", 1, Format::DecimalExponent),
];

/// `n / d` rounded away from zero (`d > 0`): how upstream rounds to whole nanos.
fn div_away(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n > 0 {
        q + 1
    } else {
        q - 1
    }
}

/// A quantity text together with its exact value in nanos and the format it must parse to.
#[derive(Debug, Clone)]
struct Exact {
    text: String,
    nanos: i128,
    format: Format,
}

/// `<sign><mantissa / 10^decimals><suffix>`, e.g. `-0.005Ki`, `+1500m`, `12e-3`. Binary
/// mantissas stay below upstream's 2^63 cap.
fn exact_quantity() -> impl Strategy<Value = Exact> {
    let mantissa = prop_oneof![
        -1_000i64..=1_000,
        -1_000_000_000i64..=1_000_000_000,
        Just(0i64),
    ];
    (
        mantissa,
        prop_oneof![Just(0u32), 0u32..=12],
        0..QUANTITY_SUFFIXES.len(),
        any::<bool>(),
    )
        .prop_map(|(m, decimals, suffix_idx, plus)| {
            let (suffix, per_unit, suffix_format) = QUANTITY_SUFFIXES[suffix_idx];
            let mut digits = m.unsigned_abs().to_string();
            if decimals > 0 {
                let width = decimals as usize + 1;
                if digits.len() < width {
                    digits = format!("{digits:0>width$}");
                }
                digits.insert(digits.len() - decimals as usize, '.');
            }
            let sign = if m < 0 {
                "-"
            } else if plus {
                "+"
            } else {
                ""
            };
            let nanos = div_away(i128::from(m) * per_unit, 10i128.pow(decimals));
            // A non-zero binary value below one unit is kept as DecimalSI.
            let format = if suffix_format == Format::BinarySI && nanos != 0 && nanos.abs() < UNIT {
                Format::DecimalSI
            } else {
                suffix_format
            };
            Exact {
                text: format!("{sign}{digits}{suffix}"),
                nanos,
                format,
            }
        })
}

fn any_format() -> impl Strategy<Value = Format> {
    select(vec![
        Format::DecimalSI,
        Format::BinarySI,
        Format::DecimalExponent,
    ])
}

fn parse_q(text: &str) -> Result<Quantity, TestCaseError> {
    text.parse::<Quantity>()
        .map_err(|e| fail(format!("{text:?} must parse: {e}")))
}

/// The exact reference value as a Quantity: `<n>n` parses exactly for any integer n.
fn nanos_q(nanos: i128) -> Quantity {
    format!("{nanos}n")
        .parse()
        .unwrap_or_else(|e| panic!("{nanos}n: {e}"))
}

/// The canonical (uncached) form: arithmetic always re-canonicalises, and adding zero keeps
/// a non-zero value's format.
fn canonical(q: &Quantity) -> Quantity {
    q.checked_add(&Quantity::zero()).expect("adding zero")
}

/// A quantity built through the public API (parsed, constructed or computed) with its exact
/// value. BinarySI magnitudes stay below 2^63, where upstream's parser caps them.
fn built_quantity() -> impl Strategy<Value = (Quantity, i128)> {
    let leaf = prop_oneof![
        exact_quantity().prop_map(|e| (parse_exact(&e), e.nanos)),
        (any::<i64>(), any_format())
            .prop_map(|(v, f)| (Quantity::from_milli(v, f), i128::from(v) * 1_000_000)),
        (-(1i64 << 61)..=(1i64 << 61), any_format())
            .prop_map(|(v, f)| (Quantity::from_integer(v, f), i128::from(v) * UNIT)),
    ];
    prop_oneof![
        leaf.clone(),
        (leaf.clone(), leaf, 0u8..3, -3i64..=3).prop_map(|((a, na), (b, nb), op, k)| {
            match op {
                0 => (a.checked_add(&b).expect("in range"), na + nb),
                1 => (a.checked_sub(&b).expect("in range"), na - nb),
                _ => (a.checked_mul_int(k).expect("in range"), na * i128::from(k)),
            }
        }),
    ]
}

fn parse_exact(e: &Exact) -> Quantity {
    e.text
        .parse()
        .unwrap_or_else(|err| panic!("{:?}: {err}", e.text))
}

/// apimachinery's canonical `String()` for an uncached value, stated structurally: `0`; or a
/// mantissa without leading zeros and, for decimal forms, not divisible by 1000 (so the
/// exponent is the largest multiple of 3), with an SI suffix (DecimalSI/BinarySI up to `E`,
/// `e<exp>` beyond) or `e<exp>` (DecimalExponent); BinarySI whole values of at least 1024
/// use the largest binary suffix. Together with the value this pins the text exactly.
fn check_canonical(text: &str, format: Format, nanos: i128) -> Result<(), TestCaseError> {
    let err = |why: &str| -> Result<(), TestCaseError> {
        Err(fail(format!(
            "{text:?} is not the canonical {format:?} text of {nanos}n: {why}"
        )))
    };
    if nanos == 0 {
        return if text == "0" {
            Ok(())
        } else {
            err("zero prints as 0")
        };
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text),
    };
    if negative != (nanos < 0) {
        return err("sign");
    }
    let split = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    let (digits, suffix) = body.split_at(split);
    if digits.is_empty() || digits.starts_with('0') {
        return err("mantissa must be digits without leading zeros");
    }
    let Ok(mantissa) = digits.parse::<u128>() else {
        return err("mantissa out of range");
    };
    let magnitude = nanos.unsigned_abs();
    let unit = UNIT.unsigned_abs();
    if format == Format::BinarySI && magnitude.is_multiple_of(unit) && magnitude >= 1024 * unit {
        let Some(power) = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
            .iter()
            .position(|s| *s == suffix)
        else {
            return err("binary suffix expected");
        };
        if mantissa.is_multiple_of(1024) {
            return err("a larger binary suffix fits");
        }
        let value = 1024u128
            .checked_pow(power as u32)
            .and_then(|p| p.checked_mul(mantissa))
            .and_then(|v| v.checked_mul(unit));
        if value != Some(magnitude) {
            return err("value");
        }
        return Ok(());
    }
    let exponent: i32 = match suffix {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => match suffix.strip_prefix('e').map(str::parse::<i32>) {
            Some(Ok(e)) if e != 0 => e,
            _ => return err("unknown suffix"),
        },
    };
    let e_form = suffix.starts_with('e');
    match format {
        Format::DecimalExponent if !e_form && !suffix.is_empty() => {
            return err("DecimalExponent uses e-notation");
        }
        Format::DecimalSI | Format::BinarySI if e_form && exponent <= 18 => {
            return err("an SI suffix fits");
        }
        _ => {}
    }
    if exponent < -9 || exponent % 3 != 0 {
        return err("exponent must be a multiple of 3, at least -9");
    }
    if mantissa.is_multiple_of(1000) {
        return err("a larger exponent fits");
    }
    let value = 10u128
        .checked_pow((exponent + 9) as u32)
        .and_then(|scale| scale.checked_mul(mantissa));
    if value != Some(magnitude) {
        return err("value");
    }
    Ok(())
}

/// Inputs meant to break the parser: arbitrary unicode, the quantity alphabet, huge digit
/// strings with extreme exponents, and known troublemakers.
fn hostile_quantity_text() -> impl Strategy<Value = String> {
    let suffixes = vec![
        "",
        "m",
        "n",
        "Ki",
        "Ei",
        "E",
        "i",
        "Mii",
        "e",
        "e-",
        "E+5",
        "e999999",
        "e-999999",
        "e2147483647",
        "e-2147483648",
        "e4294967296",
        "e9223372036854775807",
        "e-9223372036854775808",
        "e99999999999999999999",
    ];
    prop_oneof![
        any::<String>(),
        "[0-9.+eEinumkKMGTP -]{0,24}",
        (
            "[+-]?",
            "[0-9]{0,300}",
            proptest::option::of("[0-9]{0,300}"),
            select(suffixes),
        )
            .prop_map(|(sign, int, frac, suffix)| match frac {
                Some(frac) => format!("{sign}{int}.{frac}{suffix}"),
                None => format!("{sign}{int}{suffix}"),
            }),
        select(vec![
            "1e999999",
            "-",
            "+",
            ".",
            "1.2.3",
            "",
            "-.",
            "e3",
            "Ki",
            "0.0000000000000000000000000001Ei",
            "99999999999999999999999999999999999999999",
            "9223372036854775808Ei",
            "1e-9223372036854775808",
            "\u{0}",
            "１",
            "1\u{a0}",
        ])
        .prop_map(String::from),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    /// (a) parse(String(q)) == q for quantities built every public way, String() of an
    /// uncached value is canonical, canonicalisation is idempotent, and it reproduces the
    /// same text except where upstream itself changes it (a BinarySI whole value printed
    /// without a binary suffix re-parses as DecimalSI, e.g. `5464000` -> `5464k`).
    #[test]
    fn quantity_text_round_trips_and_is_canonical((q, nanos) in built_quantity()) {
        prop_assert_eq!(&q, &nanos_q(nanos));
        let canon = canonical(&q);
        let expected_format = if nanos == 0 { Format::DecimalSI } else { q.format() };
        prop_assert_eq!(canon.format(), expected_format);
        let text = canon.to_string();
        check_canonical(&text, expected_format, nanos)?;

        let back = parse_q(&text)?;
        prop_assert_eq!(&back, &q, "{:?} re-parsed", text);
        let again = canonical(&back).to_string();
        check_canonical(&again, back.format(), nanos)?;
        prop_assert_eq!(canonical(&parse_q(&again)?).to_string(), again.clone());
        let binary_without_suffix = expected_format == Format::BinarySI && !text.ends_with('i');
        if !binary_without_suffix {
            prop_assert_eq!(&again, &text);
            prop_assert_eq!(back.to_string(), text.clone());
        }
        // Whatever q's own String() is (cached input text included), it re-parses to q.
        prop_assert_eq!(&parse_q(&q.to_string())?, &q);
        prop_assert_eq!(q.to_k8s().0, q.to_string());
    }

    /// (b) Parsing, Cmp, Add, Sub, Mul, Max, RoundUp(0), Value() and MilliValue() agree with
    /// exact i128 arithmetic on nanos, including upstream's away-from-zero rounding of
    /// fractional nanos, and results print canonically in the format upstream picks.
    #[test]
    fn quantity_arithmetic_matches_exact_reference(
        a in exact_quantity(),
        b in exact_quantity(),
        k in -1_000i64..=1_000,
    ) {
        let qa = parse_q(&a.text)?;
        let qb = parse_q(&b.text)?;
        prop_assert_eq!(&qa, &nanos_q(a.nanos), "{}", a.text);
        prop_assert_eq!(qa.format(), a.format, "{}", a.text);
        prop_assert_eq!(qb.format(), b.format, "{}", b.text);
        prop_assert_eq!(qa.is_zero(), a.nanos == 0);
        prop_assert_eq!(qa.is_negative(), a.nanos < 0);
        prop_assert_eq!(qa.cmp(&qb), a.nanos.cmp(&b.nanos));
        prop_assert_eq!(qa == qb, a.nanos == b.nanos);

        // A zero left operand takes the right operand's format.
        let op_format = if a.nanos == 0 { b.format } else { a.format };
        let sum = qa.checked_add(&qb).expect("in range");
        prop_assert_eq!(&sum, &nanos_q(a.nanos + b.nanos));
        prop_assert_eq!(sum.format(), op_format);
        check_canonical(&sum.to_string(), op_format, a.nanos + b.nanos)?;

        let diff = qa.checked_sub(&qb).expect("in range");
        prop_assert_eq!(&diff, &nanos_q(a.nanos - b.nanos));
        prop_assert_eq!(diff.format(), op_format);
        check_canonical(&diff.to_string(), op_format, a.nanos - b.nanos)?;

        let product = qa.checked_mul_int(k).expect("in range");
        prop_assert_eq!(&product, &nanos_q(a.nanos * i128::from(k)));
        prop_assert_eq!(product.format(), a.format);
        check_canonical(&product.to_string(), a.format, a.nanos * i128::from(k))?;

        let max = Quantity::max(&qa, &qb);
        prop_assert_eq!(&max, &nanos_q(a.nanos.max(b.nanos)));
        let max_format = if a.nanos > b.nanos { a.format } else { b.format };
        prop_assert_eq!(max.format(), max_format);

        prop_assert_eq!(qa.milli_value(), div_away(a.nanos, 1_000_000));
        prop_assert_eq!(qa.value_ceil(), div_away(a.nanos, UNIT));
        let rounded = qa.round_up_to_integer();
        prop_assert_eq!(&rounded, &nanos_q(div_away(a.nanos, UNIT) * UNIT));
        prop_assert_eq!(rounded.format(), a.format);
    }

    /// (c) Parsing anything never panics; whatever parses re-parses from its String(), its
    /// accessors and arithmetic don't panic, and the k8s-openapi conversion agrees.
    #[test]
    fn quantity_parse_never_panics(text in hostile_quantity_text()) {
        let parsed = text.parse::<Quantity>();
        if text.trim() == text {
            let wrapped = K8sQuantity(format!(" {text}\n"));
            prop_assert_eq!(Quantity::try_from(&wrapped), parsed.clone());
        }
        if let Ok(q) = parsed {
            let shown = q.to_string();
            let back = parse_q(&shown)?;
            prop_assert_eq!(&back, &q, "{:?} -> {:?}", text, shown);
            let canon = canonical(&q).to_string();
            prop_assert_eq!(&parse_q(&canon)?, &q, "{:?} -> {:?}", text, canon);
            let _ = (q.milli_value(), q.value_ceil(), q.round_up_to_integer());
            let _ = (q.checked_add(&q), q.checked_sub(&q), q.checked_mul_int(-7));
        }
    }
}

/// (d) Exact apimachinery `String()` texts (ParseQuantity, then arithmetic).
#[test]
fn quantity_literal_canonical_forms() {
    let q = |s: &str| {
        s.parse::<Quantity>()
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
    };
    let parsed = [
        ("1500m", "1500m"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("-1.5Gi", "-1536Mi"),
        ("10k", "10k"),
        ("10000", "10k"),
        ("10000m", "10"),
        ("0.01k", "10"),
        ("0", "0"),
        ("0.0", "0"),
        ("-0", "0"),
        ("0.5", "500m"),
        ("2000m", "2"),
        ("1024", "1024"),
        ("1024Ki", "1Mi"),
        ("0.5Ki", "512"),
        ("1000000000n", "1"),
    ];
    for (input, want) in parsed {
        assert_eq!(q(input).to_string(), want, "String() of {input:?}");
    }
    let add = |a: &str, b: &str| q(a).checked_add(&q(b)).unwrap().to_string();
    let sub = |a: &str, b: &str| q(a).checked_sub(&q(b)).unwrap().to_string();
    assert_eq!(add("100m", "900m"), "1");
    assert_eq!(add("1Gi", "512Mi"), "1536Mi");
    assert_eq!(add("0.5", "0.5"), "1");
    assert_eq!(add("1e3", "1e3"), "2e3");
    assert_eq!(add("0", "1536Mi"), "1536Mi");
    assert_eq!(sub("1Mi", "1Ki"), "1023Ki");
    assert_eq!(sub("1Ki", "1"), "1023");
    assert_eq!(sub("1Ki", "1Ki"), "0");
    assert_eq!(sub("100m", "1"), "-900m");
    assert_eq!(q("250m").checked_mul_int(4).unwrap().to_string(), "1");
    assert_eq!(q("1Ki").checked_mul_int(1024).unwrap().to_string(), "1Mi");
}

// =============================================================================================
// Label selectors
// =============================================================================================

type Labels = BTreeMap<String, String>;

const KEYS: &[&str] = &["a", "b", "c", "example.com/d"];
const VALUES: &[&str] = &["", "x", "y", "z"];
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

fn small_key() -> impl Strategy<Value = String> {
    select(KEYS).prop_map(String::from)
}

fn small_value() -> impl Strategy<Value = String> {
    select(VALUES).prop_map(String::from)
}

/// Label maps over the same small universe as the selectors, so matches are common.
fn small_labels() -> impl Strategy<Value = Option<Labels>> {
    proptest::option::weighted(
        0.9,
        proptest::collection::btree_map(small_key(), small_value(), 0..=4),
    )
}

fn valid_expression() -> impl Strategy<Value = LabelSelectorRequirement> {
    (
        small_key(),
        0..OPERATORS.len(),
        proptest::collection::vec(small_value(), 1..=3),
        any::<bool>(),
    )
        .prop_map(|(key, op, values, explicit_empty)| {
            let operator = OPERATORS[op];
            let values = match operator {
                "In" | "NotIn" => Some(values),
                _ => explicit_empty.then(Vec::new),
            };
            LabelSelectorRequirement {
                key,
                operator: operator.to_owned(),
                values,
            }
        })
}

fn valid_selector() -> impl Strategy<Value = LabelSelector> {
    (
        proptest::option::of(proptest::collection::btree_map(
            small_key(),
            small_value(),
            0..=3,
        )),
        proptest::option::of(proptest::collection::vec(valid_expression(), 0..=4)),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

/// The API's selector semantics, brute force: every matchLabels pair present, every
/// expression satisfied (an absent key satisfies NotIn and DoesNotExist only).
fn reference_matches(sel: &LabelSelector, labels: Option<&Labels>) -> bool {
    let empty = Labels::new();
    let labels = labels.unwrap_or(&empty);
    let pairs_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let have = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => have.is_none_or(|v| !values.contains(v)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            other => panic!("reference given operator {other:?}"),
        }
    });
    pairs_ok && exprs_ok
}

/// A parser for `labels.Selector.String()` as `LabelSelectorAsSelector` produces it (keys and
/// values are validated, so they contain none of `,()= !`), back into a LabelSelector.
fn parse_selector_string(text: &str) -> Result<LabelSelector, String> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced )")?,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text.is_empty() {
        terms.push(&text[start..]);
    }
    let mut match_labels = Labels::new();
    let mut match_expressions = Vec::new();
    let expr = |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values,
    };
    let list = |rest: &str| -> Result<Vec<String>, String> {
        let inner = rest.strip_suffix(')').ok_or(format!("no ) in {rest:?}"))?;
        Ok(inner.split(',').map(String::from).collect())
    };
    for term in terms {
        if let Some(key) = term.strip_prefix('!') {
            match_expressions.push(expr(key, "DoesNotExist", None));
        } else if let Some((key, rest)) = term.split_once(" notin (") {
            match_expressions.push(expr(key, "NotIn", Some(list(rest)?)));
        } else if let Some((key, rest)) = term.split_once(" in (") {
            match_expressions.push(expr(key, "In", Some(list(rest)?)));
        } else if let Some((key, value)) = term.split_once('=') {
            if match_labels
                .insert(key.to_owned(), value.to_owned())
                .is_some()
            {
                return Err(format!("two equality terms on {key:?}"));
            }
        } else {
            match_expressions.push(expr(term, "Exists", None));
        }
    }
    Ok(LabelSelector {
        match_labels: Some(match_labels),
        match_expressions: Some(match_expressions),
    })
}

/// `content.IsLabelValue`: empty, or at most 63 of `[-A-Za-z0-9_.]` starting and ending
/// alphanumeric.
fn reference_value_valid(v: &str) -> bool {
    let b = v.as_bytes();
    v.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// `content.IsLabelKey`: a non-empty name valid as a value, optionally behind a DNS-1123
/// subdomain prefix (at most 253, dot-separated `[a-z0-9]([-a-z0-9]*[a-z0-9])?`) and `/`.
fn reference_key_valid(key: &str) -> bool {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && edge(&b[0])
            && edge(&b[b.len() - 1])
            && b.iter().all(|c| edge(c) || *c == b'-')
    };
    let name_ok = |n: &str| !n.is_empty() && reference_value_valid(n);
    match key.split_once('/') {
        None => name_ok(key),
        Some((prefix, name)) => {
            !name.contains('/')
                && !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(label_ok)
                && name_ok(name)
        }
    }
}

fn wild_string() -> impl Strategy<Value = String> {
    prop_oneof![
        small_key(),
        "[a-zA-Z0-9._/-]{0,12}",
        "[a-z0-9.-]{0,12}/[a-zA-Z0-9._-]{0,12}",
        "[a-z]{60,66}",
        "[a-z0-9]{1,5}(\\.[a-z0-9]{60,63}){3,4}/[a-z]{1,3}",
        "[a-zA-Z0-9 ,()=!._-]{0,10}",
        any::<String>(),
    ]
}

fn wild_selector() -> impl Strategy<Value = LabelSelector> {
    let operator = prop_oneof![
        select(OPERATORS).prop_map(String::from),
        select(vec!["in", "Gt", "", "Equals"]).prop_map(String::from),
        any::<String>(),
    ];
    let expression = (
        wild_string(),
        operator,
        proptest::option::of(proptest::collection::vec(wild_string(), 0..=3)),
    )
        .prop_map(|(key, operator, values)| LabelSelectorRequirement {
            key,
            operator,
            values,
        });
    (
        proptest::option::of(proptest::collection::btree_map(
            wild_string(),
            wild_string(),
            0..=3,
        )),
        proptest::option::of(proptest::collection::vec(expression, 0..=3)),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

proptest! {
    #![proptest_config(config(512))]

    /// `matches` agrees with brute-force In/NotIn/Exists/DoesNotExist/equality semantics on
    /// random label maps; nil selects nothing; `is_empty` only for a select-all selector.
    #[test]
    fn selector_matches_brute_force_reference(
        sel in valid_selector(),
        label_sets in proptest::collection::vec(small_labels(), 1..=8),
    ) {
        let parsed = from_label_selector(Some(&sel))
            .map_err(|e| fail(format!("{sel:?} is valid: {e}")))?;
        let restricts = sel.match_labels.iter().flatten().count()
            + sel.match_expressions.iter().flatten().count();
        prop_assert_eq!(parsed.is_empty(), restricts == 0);
        for labels in &label_sets {
            let want = reference_matches(&sel, labels.as_ref());
            prop_assert_eq!(parsed.matches(labels.as_ref()), want, "{} vs {:?}", parsed, labels);
            prop_assert_eq!(selector::matches(Some(&sel), labels.as_ref()), want);
            prop_assert!(!selector::matches(None, labels.as_ref()));
        }
    }

    /// String() re-parses (with a parser for upstream's selector syntax) to a selector with
    /// the same String() and the same matching behaviour.
    #[test]
    fn selector_string_round_trips(
        sel in valid_selector(),
        label_sets in proptest::collection::vec(small_labels(), 1..=8),
    ) {
        let parsed = from_label_selector(Some(&sel)).map_err(|e| fail(e.to_string()))?;
        let text = parsed.to_string();
        let reparsed_api = parse_selector_string(&text).map_err(fail)?;
        let reparsed = from_label_selector(Some(&reparsed_api))
            .map_err(|e| fail(format!("{text:?} re-parsed invalid: {e}")))?;
        prop_assert_eq!(reparsed.to_string(), text.clone());
        for labels in &label_sets {
            prop_assert_eq!(
                reparsed.matches(labels.as_ref()),
                parsed.matches(labels.as_ref()),
                "{:?} vs {:?}", text, labels
            );
        }
    }

    /// Arbitrary selectors never panic; an invalid one selects nothing, a valid one matches
    /// exactly as the reference does.
    #[test]
    fn selector_arbitrary_input_never_panics(
        sel in wild_selector(),
        labels in proptest::option::of(proptest::collection::btree_map(
            wild_string(), wild_string(), 0..=4)),
    ) {
        let known_ops = sel
            .match_expressions
            .iter()
            .flatten()
            .all(|e| OPERATORS.contains(&e.operator.as_str()));
        match from_label_selector(Some(&sel)) {
            Ok(parsed) => {
                prop_assert!(known_ops);
                let _ = parsed.to_string();
                let want = reference_matches(&sel, labels.as_ref());
                prop_assert_eq!(parsed.matches(labels.as_ref()), want);
                prop_assert_eq!(selector::matches(Some(&sel), labels.as_ref()), want);
            }
            Err(err) => {
                prop_assert!(!err.to_string().is_empty());
                prop_assert!(!selector::matches(Some(&sel), labels.as_ref()));
            }
        }
        prop_assert!(matches!(from_label_selector(None), Ok(Selector::Nothing)));
    }

    /// A matchLabels term is accepted exactly when its key and value pass apimachinery's
    /// IsQualifiedName / IsValidLabelValue rules; an Exists term exactly when its key does.
    #[test]
    fn selector_validation_matches_reference(key in wild_string(), value in wild_string()) {
        let pair = LabelSelector {
            match_labels: Some(Labels::from([(key.clone(), value.clone())])),
            match_expressions: None,
        };
        prop_assert_eq!(
            from_label_selector(Some(&pair)).is_ok(),
            reference_key_valid(&key) && reference_value_valid(&value),
            "{:?}={:?}", key, value
        );
        let exists = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.clone(),
                operator: "Exists".to_owned(),
                values: None,
            }]),
        };
        prop_assert_eq!(from_label_selector(Some(&exists)).is_ok(), reference_key_valid(&key));
    }
}

// =============================================================================================
// PodDisruptionBudget budget
// =============================================================================================

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).expect("valid timestamp"))
}

fn later() -> Time {
    Time(Timestamp::from_second(1_700_000_600).expect("valid timestamp"))
}

/// minAvailable/maxUnavailable: integers (negative and extreme included), percentages in and
/// out of 0–100%, garbage and arbitrary strings.
fn int_or_string() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        (-5i32..=200).prop_map(IntOrString::Int),
        any::<i32>().prop_map(IntOrString::Int),
        (-50i64..=250).prop_map(|p| IntOrString::String(format!("{p}%"))),
        select(vec![
            "150%",
            "-5%",
            "abc",
            "",
            "%",
            "5",
            "5.5%",
            "1e2%",
            " 5%",
            "+5%",
            "50%%",
            "99999999999999999999%",
            "9223372036854775807%",
            "\u{663}%",
        ])
        .prop_map(|s| IntOrString::String(s.to_owned())),
        any::<String>().prop_map(IntOrString::String),
    ]
}

/// Go's strconv.Atoi on the part before `%`: optional sign, ASCII digits, fits int64.
fn reference_percent(s: &str) -> Option<i64> {
    let digits = s.strip_suffix('%')?;
    let unsigned = digits
        .strip_prefix('-')
        .or_else(|| digits.strip_prefix('+'))
        .unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let value: i128 = unsigned.parse().ok()?;
    let value = if digits.starts_with('-') {
        -value
    } else {
        value
    };
    i64::try_from(value).ok()
}

/// `pct * total / 100` rounded up or down, as the int32 upstream keeps (exact for the
/// magnitudes where float64 is, |pct| <= 10^6).
fn reference_scaled(pct: i64, total: i32, round_up: bool) -> i32 {
    let product = i128::from(pct) * i128::from(total);
    let mut q = product.div_euclid(100);
    if round_up && product.rem_euclid(100) != 0 {
        q += 1;
    }
    q as i64 as i32
}

/// (expected, desired) from first principles, when the reference can compute it exactly.
fn reference_expected_desired(
    spec: &PodDisruptionBudgetSpec,
    matching: i32,
    scale: i32,
) -> Option<(i32, i32)> {
    let percent = |s: &str| reference_percent(s).filter(|p| p.abs() <= 1_000_000);
    match (&spec.min_available, &spec.max_unavailable) {
        (None, Some(IntOrString::Int(m))) => Some((scale, scale.wrapping_sub(*m).max(0))),
        (None, Some(IntOrString::String(s))) => {
            let unavailable = reference_scaled(percent(s)?, scale, true);
            Some((scale, scale.wrapping_sub(unavailable).max(0)))
        }
        (Some(IntOrString::Int(m)), None) => Some((matching, *m)),
        (Some(IntOrString::String(s)), None) => {
            Some((scale, reference_scaled(percent(s)?, scale, true)))
        }
        (None, None) => Some((0, 0)),
        (Some(_), Some(_)) => None,
    }
}

fn allowed_condition(status: &PodDisruptionBudgetStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_ALLOWED_CONDITION)
}

fn pdb_with(
    spec: PodDisruptionBudgetSpec,
    generation: i64,
    status: Option<PodDisruptionBudgetStatus>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("pdb".to_owned()),
            namespace: Some("default".to_owned()),
            generation: Some(generation),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status,
    }
}

proptest! {
    #![proptest_config(config(1024))]

    /// GetScaledValueFromIntOrPercent: exact integer ceil/floor of pct*total/100; integers
    /// pass through; a non-percentage string is an error with upstream's text; garbage never
    /// panics.
    #[test]
    fn pdb_scaled_value_matches_integer_reference(
        pct in -1_000_000i64..=1_000_000,
        total in prop_oneof![0i32..=1_000, 0i32..=i32::MAX],
        round_up in any::<bool>(),
        int in any::<i32>(),
        garbage in int_or_string(),
    ) {
        let value = IntOrString::String(format!("{pct}%"));
        prop_assert_eq!(
            scaled_value(&value, total, round_up),
            Ok(reference_scaled(pct, total, round_up))
        );
        prop_assert_eq!(scaled_value(&IntOrString::Int(int), total, round_up), Ok(int));
        if let IntOrString::String(s) = &garbage {
            let got = scaled_value(&garbage, total, round_up);
            prop_assert_eq!(got.is_ok(), reference_percent(s).is_some(), "{:?}", s);
            if !s.ends_with('%') {
                prop_assert_eq!(
                    got.map_err(|e| e.to_string()),
                    Err("invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_owned())
                );
            }
        }
    }

    /// The whole sync: an invalid spec (both fields, a negative count, a percentage outside
    /// 0-100% or none at all, scale not known) always fails safe to disruptionsAllowed 0 with
    /// SyncFailed; a valid one yields the reference (expected, desired), desired >= 0, and
    /// 0 <= disruptionsAllowed <= max(0, currentHealthy - desiredHealthy) <= currentHealthy,
    /// 0 when nothing is expected. Writing either result back makes the next sync a no-op.
    #[test]
    fn pdb_disruptions_allowed_is_bounded_and_fails_safe(
        min in proptest::option::of(int_or_string()),
        max in proptest::option::of(int_or_string()),
        matching in 0i32..=5_000,
        scale in proptest::option::weighted(0.9, 0i32..=5_000),
        healthy in 0i32..=6_000,
        generation in 0i64..=3,
        old_allowed in proptest::option::of(any::<i32>()),
    ) {
        let spec = PodDisruptionBudgetSpec {
            min_available: min.clone(),
            max_unavailable: max.clone(),
            ..PodDisruptionBudgetSpec::default()
        };
        let old = old_allowed.map(|a| PodDisruptionBudgetStatus {
            disruptions_allowed: Some(a),
            ..PodDisruptionBudgetStatus::default()
        });
        let pdb = pdb_with(spec.clone(), generation, old);
        // What API validation refuses (a negative count, a percentage outside 0-100%) and
        // what is no percentage at all (strconv.Atoi fails) are both invalid.
        let refused = [&min, &max].into_iter().flatten().any(|v| match v {
            IntOrString::Int(n) => *n < 0,
            IntOrString::String(s) => {
                reference_percent(s).is_none_or(|p| !(0..=100).contains(&p))
            }
        });
        let needs_scale = max.is_some() || matches!(min, Some(IntOrString::String(_)));
        prop_assert_eq!(needs_controller_scale(&spec), needs_scale);
        let invalid = (min.is_some() && max.is_some())
            || (needs_scale && scale.is_none())
            || refused;

        let result = expected_and_desired(&spec, matching, scale).map_err(|e| e.to_string());
        prop_assert_eq!(result.is_err(), invalid, "{:?} scale {:?}: {:?}", spec, scale, result);
        match result {
            Err(msg) => {
                if min.is_some() && max.is_some() {
                    prop_assert_eq!(msg.as_str(), BOTH_SET);
                }
                let status = fail_safe_status(&pdb, &msg, &now())
                    .ok_or_else(|| fail("a first fail-safe always writes".into()))?;
                prop_assert_eq!(status.disruptions_allowed, Some(0));
                let cond = allowed_condition(&status).ok_or_else(|| fail("no condition".into()))?;
                prop_assert_eq!(
                    (cond.status.as_str(), cond.reason.as_str(), cond.message.as_str()),
                    ("False", SYNC_FAILED_REASON, msg.as_str())
                );
                let again = pdb_with(spec, generation, Some(status));
                prop_assert!(fail_safe_status(&again, &msg, &later()).is_none());
            }
            Ok((expected, desired)) => {
                let scale = scale.unwrap_or(0);
                if let Some(want) = reference_expected_desired(&spec, matching, scale) {
                    prop_assert_eq!((expected, desired), want);
                }
                // Valid specs never ask for a negative number of healthy pods, so the budget
                // never exceeds the healthy pods.
                prop_assert!(desired >= 0);
                let empty = BTreeMap::new();
                let status = new_status(&pdb, healthy, desired, expected, &empty, &now())
                    .ok_or_else(|| fail("no condition yet, so a write".into()))?;
                let allowed = status.disruptions_allowed.unwrap_or(-1);
                let room = i64::from(healthy) - i64::from(desired);
                prop_assert!(allowed >= 0);
                prop_assert!(i64::from(allowed) <= room.max(0), "{} > {}", allowed, room);
                prop_assert!(allowed <= healthy);
                if expected <= 0 {
                    prop_assert_eq!(allowed, 0);
                } else if room <= i64::from(i32::MAX) {
                    prop_assert_eq!(i64::from(allowed), room.max(0));
                }
                let cond = allowed_condition(&status).ok_or_else(|| fail("no condition".into()))?;
                let want = if allowed > 0 {
                    ("True", SUFFICIENT_PODS_REASON)
                } else {
                    ("False", INSUFFICIENT_PODS_REASON)
                };
                prop_assert_eq!((cond.status.as_str(), cond.reason.as_str()), want);
                prop_assert_eq!(
                    (status.current_healthy, status.desired_healthy, status.expected_pods),
                    (Some(healthy), Some(desired), Some(expected))
                );
                // int64 with omitempty: generation 0 is absent.
                prop_assert_eq!(status.observed_generation, Some(generation).filter(|g| *g != 0));
                let again = pdb_with(spec, generation, Some(status));
                prop_assert!(new_status(&again, healthy, desired, expected, &empty, &later())
                    .is_none());
            }
        }
    }

    /// new_status over the whole int32 range (healthy is a count, so never negative):
    /// disruptionsAllowed stays in [0, max(0, healthy - desired)], and a fail-safe status
    /// never sticks: the next successful sync always rewrites the condition.
    #[test]
    fn pdb_new_status_bounds_and_fail_safe_recovery(
        healthy in prop_oneof![0i32..=100, 0i32..=i32::MAX],
        desired in prop_oneof![-100i32..=100, any::<i32>()],
        expected in prop_oneof![-2i32..=100, any::<i32>()],
    ) {
        let empty = BTreeMap::new();
        let pdb = pdb_with(PodDisruptionBudgetSpec::default(), 1, None);
        let status = new_status(&pdb, healthy, desired, expected, &empty, &now())
            .ok_or_else(|| fail("first sync writes".into()))?;
        let allowed = status.disruptions_allowed.unwrap_or(-1);
        let room = i64::from(healthy) - i64::from(desired);
        prop_assert!(allowed >= 0 && i64::from(allowed) <= room.max(0), "{} vs {}", allowed, room);
        if expected <= 0 {
            prop_assert_eq!(allowed, 0);
        }
        let failed = fail_safe_status(&pdb_with(PodDisruptionBudgetSpec::default(), 1, Some(status)), "boom", &now())
            .ok_or_else(|| fail("fail-safe changes the condition".into()))?;
        prop_assert_eq!(failed.disruptions_allowed, Some(0));
        let failed_pdb = pdb_with(PodDisruptionBudgetSpec::default(), 1, Some(failed));
        let recovered = new_status(&failed_pdb, healthy, desired, expected, &empty, &later())
            .ok_or_else(|| fail("a fail-safe status must not stick".into()))?;
        let cond = allowed_condition(&recovered).ok_or_else(|| fail("no condition".into()))?;
        prop_assert!(cond.reason == SUFFICIENT_PODS_REASON || cond.reason == INSUFFICIENT_PODS_REASON);
        prop_assert_eq!(cond.message.as_str(), "");
        prop_assert_eq!(recovered.disruptions_allowed, Some(allowed));
    }
}

// =============================================================================================
// TTL state machine
// =============================================================================================

/// The step a TTL belongs to (each TTL is in the table once).
fn step_of(ttl: i32) -> Result<usize, TestCaseError> {
    BOUNDARIES
        .iter()
        .position(|b| b.ttl_seconds == ttl)
        .ok_or_else(|| fail(format!("{ttl}s is not a table TTL")))
}

/// Runs of node additions (true) or deletions, biased upwards so walks reach the top step.
fn node_walk() -> impl Strategy<Value = Vec<(bool, usize)>> {
    proptest::collection::vec(
        (
            prop_oneof![3 => Just(true), 2 => Just(false)],
            prop_oneof![1usize..=5, 1usize..=700],
        ),
        1..=40,
    )
}

/// Applies one event, checking the hysteresis rules; returns whether the TTL changed.
fn step_checked(state: &mut TtlState, count: &mut usize, add: bool) -> Result<bool, TestCaseError> {
    let before = step_of(state.desired_ttl())?;
    let reported = if add {
        *count += 1;
        state.node_added()
    } else {
        *count = count.saturating_sub(1);
        state.node_deleted()
    };
    let after = step_of(state.desired_ttl())?;
    let c = *count;
    let band = BOUNDARIES[before];
    prop_assert_eq!(state.node_count(), c);
    prop_assert_eq!(reported, after != before, "change reported at {}", c);
    prop_assert!(
        after.abs_diff(before) <= 1,
        "{} -> {} at {}",
        before,
        after,
        c
    );
    if after > before {
        prop_assert!(
            add && c > band.size_max,
            "stepped up at {} inside {:?}",
            c,
            band
        );
    } else if after < before {
        prop_assert!(
            !add && c < band.size_min,
            "stepped down at {} inside {:?}",
            c,
            band
        );
    } else {
        prop_assert!(
            (band.size_min..=band.size_max).contains(&c),
            "stayed in {:?} at {}",
            band,
            c
        );
    }
    let now_band = BOUNDARIES[after];
    prop_assert!(
        (now_band.size_min..=now_band.size_max).contains(&c),
        "ttl {}s does not fit {} nodes",
        now_band.ttl_seconds,
        c
    );
    Ok(reported)
}

proptest! {
    #![proptest_config(config(256))]

    /// Along any ±1 walk: the count is tracked, a change is reported exactly when the TTL
    /// changes, the step moves at most one per event, up only on an add past the band's
    /// max and down only on a delete below its min, and the TTL is always the table value of
    /// a step whose band contains the count (0–100: 0s, 90–500: 15s, 450–1000: 30s,
    /// 900–2000: 60s, 1800+: 300s).
    #[test]
    fn ttl_walk_respects_hysteresis(walk in node_walk()) {
        let mut state = TtlState::default();
        let mut count = 0usize;
        prop_assert_eq!(state.desired_ttl(), 0);
        for (add, len) in walk {
            for _ in 0..len {
                step_checked(&mut state, &mut count, add)?;
            }
        }
    }

    /// No oscillation: climb to any peak, come back to a count at or next to a band edge
    /// (where a step change is one event away), then jitter ±1: the TTL changes at most once.
    #[test]
    fn ttl_jitter_changes_at_most_once(
        peak in 0usize..=2_500,
        edge in select(
            BOUNDARIES
                .iter()
                .flat_map(|b| [b.size_min, b.size_max])
                .filter(|e| *e <= 2_000)
                .collect::<Vec<_>>(),
        ),
        offset in -1i64..=1,
        first_add in any::<bool>(),
        pairs in 1usize..=20,
    ) {
        let target = edge.saturating_add_signed(offset as isize);
        let mut state = TtlState::default();
        let mut count = 0usize;
        while count < peak.max(target) {
            step_checked(&mut state, &mut count, true)?;
        }
        while count > target {
            step_checked(&mut state, &mut count, false)?;
        }
        let mut changes = 0;
        for i in 0..pairs * 2 {
            let add = first_add == (i % 2 == 0);
            changes += usize::from(step_checked(&mut state, &mut count, add)?);
        }
        prop_assert!(changes <= 1, "{} TTL changes while jittering at {}", changes, count);
    }

    /// decide: Keep exactly when the annotation is an integer (Go Atoi) equal to the desired
    /// TTL; otherwise Set the decimal desired TTL, which the next decide keeps; the patch sets
    /// exactly that annotation.
    #[test]
    fn ttl_decide_converges(
        current in proptest::option::of(prop_oneof![
            "[0-9]{1,12}",
            "[+-]?[0-9]{1,3}",
            select(vec!["0", "15", "30", "60", "300", "015", "+15", " 15", "", "1e3"])
                .prop_map(String::from),
            any::<String>(),
        ]),
        desired in prop_oneof![select(vec![0i32, 15, 30, 60, 300]), 0i32..=i32::MAX],
    ) {
        let decision = decide(current.as_deref(), desired);
        let atoi = current.as_deref().and_then(|s| s.parse::<i64>().ok());
        prop_assert_eq!(decision == Decision::Keep, atoi == Some(i64::from(desired)));
        if let Decision::Set { value, unparsable } = decision {
            prop_assert_eq!(&value, &desired.to_string());
            if let Some(bad) = &unparsable {
                prop_assert_eq!(Some(bad.as_str()), current.as_deref());
            }
            if current.is_none() {
                prop_assert_eq!(unparsable, None);
            }
            prop_assert_eq!(decide(Some(&value), desired), Decision::Keep);
            prop_assert_eq!(
                annotation_patch(&value),
                serde_json::json!({"metadata": {"annotations": {TTL_ANNOTATION: value}}})
            );
        }
    }
}

// =============================================================================================
// ResourceClaim generated names
// =============================================================================================

/// Upstream's truncation (resourceclaim controller): `<pod>-<claim>-` if at most 57 bytes,
/// else `pod[:len(pod)*57/L] + "-" + claim[:len(claim)*57/L]` with L the untruncated length —
/// except that kcm keeps at least one pod character and drops a trailing `.` of the pod part,
/// where upstream's name would be invalid.
fn reference_generate_name(pod: &str, claim: &str) -> String {
    let base = format!("{pod}-{claim}-");
    if base.len() <= 57 {
        return base;
    }
    let total = base.len();
    format!(
        "{}-{}",
        pod[..(pod.len() * 57 / total).max(1)].trim_end_matches('.'),
        &claim[..claim.len() * 57 / total]
    )
}

proptest! {
    #![proptest_config(config(1024))]

    /// For DNS-label-ish names: deterministic, at most 57 bytes (so the API server's five
    /// random characters fit in 63), kept with its trailing hyphen when short, otherwise
    /// `<pod prefix>-<claim prefix>` cut in proportion with no hyphen added at the end, and
    /// always starting with the pod name's first character (upstream's formula leaves no pod
    /// prefix for a one-character pod name and a claim of 55+ characters; kcm keeps one).
    #[test]
    fn claim_generate_name_fits_and_keeps_prefixes(
        pod in "[a-z0-9]([a-z0-9-]{0,251}[a-z0-9])?",
        claim in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
    ) {
        let name = generate_name(&pod, &claim);
        prop_assert_eq!(&generate_name(&pod, &claim), &name);
        prop_assert!(name.len() <= 57, "{} bytes", name.len());
        prop_assert!(name.len() + 5 <= 63);
        prop_assert_eq!(&name, &reference_generate_name(&pod, &claim));
        let base = format!("{pod}-{claim}-");
        if base.len() <= 57 {
            prop_assert_eq!(&name, &base);
        } else {
            let pod_part = pod[..(pod.len() * 57 / base.len()).max(1)].trim_end_matches('.');
            let rest = name.strip_prefix(pod_part).ok_or_else(|| fail("pod prefix".into()))?;
            let claim_part = rest.strip_prefix('-').ok_or_else(|| fail("one hyphen".into()))?;
            prop_assert!(claim.starts_with(claim_part));
        }
        prop_assert_eq!(name.as_bytes()[0], pod.as_bytes()[0]);
    }

    /// Arbitrary unicode never panics (cuts back off to a character boundary): still at most
    /// 57 bytes, deterministic, and a prefix of the pod name, one hyphen, a prefix of the
    /// claim name (or the untruncated `<pod>-<claim>-`).
    #[test]
    fn claim_generate_name_never_panics(pod in any::<String>(), claim in any::<String>()) {
        let name = generate_name(&pod, &claim);
        prop_assert_eq!(&generate_name(&pod, &claim), &name);
        let base = format!("{pod}-{claim}-");
        if base.len() <= 57 {
            prop_assert_eq!(name, base);
        } else {
            prop_assert!(name.len() <= 57);
            let split_ok = name.char_indices().any(|(i, c)| {
                c == '-' && pod.starts_with(&name[..i]) && claim.starts_with(&name[i + 1..])
            });
            prop_assert!(split_ok, "{:?} is not <pod prefix>-<claim prefix>", name);
        }
    }
}
