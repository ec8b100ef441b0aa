//! Flag values in Go's syntax, as kube-controller-manager's parser (pflag, strconv, klog,
//! component-base) reads them, so a command line written for it means the same here and a
//! wrong value fails the same way (the messages quote Go's).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use crate::settings::VmoduleRule;

/// Why a flag value was rejected; clap prints it after the flag's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// `strconv.ParseBool`'s message.
    #[error("strconv.ParseBool: parsing {0:?}: invalid syntax")]
    Bool(String),
    /// `strconv.ParseInt`'s message, for a malformed number.
    #[error("strconv.ParseInt: parsing {0:?}: invalid syntax")]
    IntSyntax(String),
    /// `strconv.ParseInt`'s message, for a number outside the type's range.
    #[error("strconv.ParseInt: parsing {0:?}: value out of range")]
    IntRange(String),
    #[error("strconv.ParseFloat: parsing {0:?}: invalid syntax")]
    Float(String),
    /// pflag's `ip` message.
    #[error("failed to parse IP: {0:?}")]
    Ip(String),
    /// pflag's `stringToString` message.
    #[error("{0} must be formatted as key=value")]
    KeyValue(String),
    /// klog's `-vmodule` messages.
    #[error("syntax error: expect comma-separated list of filename=N")]
    Vmodule,
    #[error("negative value for vmodule level")]
    VmoduleNegative,
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Quantity,
    /// component-base's `--logging-format` message.
    #[error("Unsupported value: {0:?}: supported values: \"json\", \"text\"")]
    LogFormat(String),
}

/// Go's `strconv.ParseBool`, which pflag uses for boolean flags and feature gates.
pub fn parse_go_bool(text: &str) -> Result<bool, ValueError> {
    crate::k8s::golang::parse_bool(text).ok_or_else(|| ValueError::Bool(text.to_owned()))
}

/// Go's `strconv.ParseInt(text, 0, bits)`, as pflag's `int`, `int32` and `int32Slice`
/// read their values: an optional sign, then decimal, `0x` hex, `0o` or leading-`0` octal, or
/// `0b` binary, with `_` allowed between digits.
fn parse_go_int(text: &str, bits: u32) -> Result<i64, ValueError> {
    let syntax = || ValueError::IntSyntax(text.to_owned());
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    // Underscores only separate digits (Go's underscoreOK, simplified: not first, last or doubled).
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || digits.starts_with(['+', '-'])
    {
        return Err(syntax());
    }
    let magnitude = u128::from_str_radix(&digits.replace('_', ""), radix).map_err(|error| {
        match error.kind() {
            std::num::IntErrorKind::PosOverflow => ValueError::IntRange(text.to_owned()),
            _ => syntax(),
        }
    })?;
    let limit = 1u128 << (bits - 1);
    let in_range = if negative {
        magnitude <= limit
    } else {
        magnitude < limit
    };
    if !in_range {
        return Err(ValueError::IntRange(text.to_owned()));
    }
    let value = magnitude as i128;
    Ok((if negative { -value } else { value }) as i64)
}

/// pflag's `int32` (and klog's `Level`, which reads base 10 only; base prefixes are rare
/// enough on `-v` that accepting them costs nothing).
pub fn go_int32(text: &str) -> Result<i32, ValueError> {
    parse_go_int(text, 32).map(|value| value as i32)
}

/// pflag's `int` (64 bits on the platforms kube-controller-manager ships for).
pub fn go_int(text: &str) -> Result<i64, ValueError> {
    parse_go_int(text, 64)
}

/// pflag's `int32Slice`: comma-separated `int32`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Int32List(pub Vec<i32>);

pub fn go_int32_list(text: &str) -> Result<Int32List, ValueError> {
    text.split(',')
        .map(go_int32)
        .collect::<Result<_, _>>()
        .map(Int32List)
}

/// Go's `strconv.ParseFloat`, as pflag's `float32` and `float64` read values (Rust's float
/// grammar is the same apart from Go's hexadecimal and `_` forms, which no manifest uses).
pub fn go_float32(text: &str) -> Result<f32, ValueError> {
    text.parse().map_err(|_| ValueError::Float(text.to_owned()))
}

pub fn go_float64(text: &str) -> Result<f64, ValueError> {
    text.parse().map_err(|_| ValueError::Float(text.to_owned()))
}

/// pflag's `ip` (Go's `net.ParseIP`; surrounding spaces are trimmed as pflag does).
pub fn go_ip(text: &str) -> Result<IpAddr, ValueError> {
    text.trim()
        .parse()
        .map_err(|_| ValueError::Ip(text.to_owned()))
}

/// pflag's `stringToString`: `k1=v1,k2=v2`, the pairs in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairs(pub Vec<(String, String)>);

pub fn string_to_string(text: &str) -> Result<Pairs, ValueError> {
    if text.is_empty() {
        return Ok(Pairs(Vec::new()));
    }
    text.split(',')
        .map(|pair| {
            pair.split_once('=')
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .ok_or_else(|| ValueError::KeyValue(pair.to_owned()))
        })
        .collect::<Result<_, _>>()
        .map(Pairs)
}

/// apimachinery's `resource.Quantity` (`--log-*-info-buffer-size`).
pub fn quantity(text: &str) -> Result<String, ValueError> {
    text.parse::<crate::k8s::quantity::Quantity>()
        .map(|_| text.to_owned())
        .map_err(|_| ValueError::Quantity)
}

/// klog's `-vmodule`: `pattern=N,...`; empty entries are skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vmodule(pub Vec<VmoduleRule>);

pub fn vmodule(text: &str) -> Result<Vmodule, ValueError> {
    let mut rules = Vec::new();
    for entry in text.split(',').filter(|entry| !entry.is_empty()) {
        let mut parts = entry.split('=');
        let (Some(pattern), Some(level), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(ValueError::Vmodule);
        };
        if pattern.is_empty() {
            return Err(ValueError::Vmodule);
        }
        let level: i32 = level.parse().map_err(|_| ValueError::Vmodule)?;
        let level =
            u8::try_from(level.min(i32::from(u8::MAX))).map_err(|_| ValueError::VmoduleNegative)?;
        rules.push(VmoduleRule {
            pattern: pattern.to_owned(),
            level,
        });
    }
    Ok(Vmodule(rules))
}

/// A `std::time::Duration` read and printed like Go's `time.Duration`, so flag values and
/// help text look exactly as they do for kube-controller-manager (`5m0s`, `1.5s`, `300ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl From<GoDuration> for Duration {
    fn from(duration: GoDuration) -> Duration {
        duration.0
    }
}

/// Why a duration string was rejected; messages follow Go's `time.ParseDuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationParseError {
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("missing unit in duration {0:?} (use ns, us, ms, s, m or h)")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?} (use ns, us, ms, s, m or h)")]
    UnknownUnit { unit: String, text: String },
    #[error("negative duration {0:?} is not allowed")]
    Negative(String),
    #[error("duration {0:?} is out of range")]
    OutOfRange(String),
}

/// Go's `time.Duration` range; larger values are errors in Go, so they are here too.
const MAX_GO_DURATION_NANOS: u128 = i64::MAX as u128;

/// Fraction digits beyond this cannot change the result at nanosecond precision even for
/// hours (3.6e12 ns), and bounding them keeps the arithmetic from overflowing.
const MAX_FRACTION_DIGITS: usize = 18;

impl FromStr for GoDuration {
    type Err = DurationParseError;

    /// Go's `time.ParseDuration` grammar: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` or a bare `0`;
    /// units ns, us (µs, μs), ms, s, m, h. Negative values are rejected; fractional
    /// nanoseconds are truncated as in Go.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || DurationParseError::Invalid(text.to_owned());
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if unsigned == "0" {
            return Ok(GoDuration(Duration::ZERO));
        }
        if unsigned.is_empty() {
            return Err(invalid());
        }

        let mut total_nanos: u128 = 0;
        let mut rest = unsigned;
        while !rest.is_empty() {
            let (whole_digits, after_whole) = split_leading_digits(rest);
            let (fraction_digits, after_number) = match after_whole.strip_prefix('.') {
                Some(after_dot) => split_leading_digits(after_dot),
                None => ("", after_whole),
            };
            if whole_digits.is_empty() && fraction_digits.is_empty() {
                return Err(invalid());
            }
            let unit_len = after_number
                .find(|character: char| character == '.' || character.is_ascii_digit())
                .unwrap_or(after_number.len());
            let (unit, after_unit) = after_number.split_at(unit_len);
            let unit_nanos: u128 = match unit {
                "" => return Err(DurationParseError::MissingUnit(text.to_owned())),
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => {
                    return Err(DurationParseError::UnknownUnit {
                        unit: unit.to_owned(),
                        text: text.to_owned(),
                    });
                }
            };

            let out_of_range = || DurationParseError::OutOfRange(text.to_owned());
            let whole = parse_bounded_digits(whole_digits).ok_or_else(out_of_range)?;
            let kept_fraction = &fraction_digits[..fraction_digits.len().min(MAX_FRACTION_DIGITS)];
            let fraction_nanos = match parse_bounded_digits(kept_fraction) {
                Some(fraction) if !kept_fraction.is_empty() => {
                    let scale = 10u128.pow(kept_fraction.len() as u32);
                    fraction * unit_nanos / scale
                }
                _ => 0,
            };
            total_nanos = whole
                .checked_mul(unit_nanos)
                .and_then(|nanos| nanos.checked_add(fraction_nanos))
                .and_then(|nanos| nanos.checked_add(total_nanos))
                .filter(|nanos| *nanos <= MAX_GO_DURATION_NANOS)
                .ok_or_else(out_of_range)?;
            rest = after_unit;
        }

        if negative && total_nanos != 0 {
            return Err(DurationParseError::Negative(text.to_owned()));
        }
        // Bounded by MAX_GO_DURATION_NANOS above, so the conversion cannot fail.
        let nanos = u64::try_from(total_nanos).map_err(|_| invalid())?;
        Ok(GoDuration(Duration::from_nanos(nanos)))
    }
}

fn split_leading_digits(text: &str) -> (&str, &str) {
    let digit_count = text.bytes().take_while(u8::is_ascii_digit).count();
    text.split_at(digit_count)
}

/// Decimal digits as a number no larger than Go's duration range; `None` past it.
fn parse_bounded_digits(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |value, digit| {
        value
            .checked_mul(10)?
            .checked_add(u128::from(digit - b'0'))
            .filter(|value| *value <= MAX_GO_DURATION_NANOS)
    })
}

/// Parses a Go duration string into a `std::time::Duration`.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationParseError> {
    text.parse::<GoDuration>().map(Duration::from)
}

impl fmt::Display for GoDuration {
    /// Go's `Duration.String`: `0s`, `300ms`, `1.5µs`, `15s`, `1m30s`, `5m0s`, `1h0m0s`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NANOS_PER_SECOND: u128 = 1_000_000_000;
        const NANOS_PER_MINUTE: u128 = 60 * NANOS_PER_SECOND;
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return formatter.write_str("0s");
        }
        if nanos < NANOS_PER_SECOND {
            let (fraction_digits, unit) = match nanos {
                0..1_000 => (0, "ns"),
                1_000..1_000_000 => (3, "µs"),
                _ => (6, "ms"),
            };
            return write!(formatter, "{}{unit}", decimal(nanos, fraction_digits));
        }
        let minutes = nanos / NANOS_PER_MINUTE;
        if minutes >= 60 {
            write!(formatter, "{}h", minutes / 60)?;
        }
        if minutes > 0 {
            write!(formatter, "{}m", minutes % 60)?;
        }
        write!(formatter, "{}s", decimal(nanos % NANOS_PER_MINUTE, 9))
    }
}

/// `value / 10^fraction_digits` printed without trailing fractional zeros.
fn decimal(value: u128, fraction_digits: u32) -> String {
    let scale = 10u128.pow(fraction_digits);
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = fraction_digits as usize;
    let fraction = format!("{fraction:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn go_ints() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5", 5),
            ("-5", -5),
            ("+7", 7),
            ("0x1F", 31),
            ("0o17", 15),
            ("017", 15),
            ("0b101", 5),
            ("1_000", 1000),
            ("2147483647", i64::from(i32::MAX)),
            ("-2147483648", i64::from(i32::MIN)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_int(text, 32), Ok(*expected), "{text}");
        }
        for text in ["", "-", "x", "1.5", "5s", "08", "_1", "1__0", "--1", "1 "] {
            assert_eq!(
                go_int32(text),
                Err(ValueError::IntSyntax(text.to_owned())),
                "{text:?}"
            );
        }
        assert_eq!(
            go_int32("2147483648").unwrap_err().to_string(),
            "strconv.ParseInt: parsing \"2147483648\": value out of range"
        );
        assert_eq!(
            go_int32("abc").unwrap_err().to_string(),
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
        assert_eq!(go_int("9223372036854775807"), Ok(i64::MAX));
        assert!(go_int("9223372036854775808").is_err());
        assert_eq!(go_int32_list("23,-1,0x1d"), Ok(Int32List(vec![23, -1, 29])));
        assert!(go_int32_list("23,x").is_err());
    }

    #[test]
    fn other_go_values() {
        assert_eq!(go_float32("0.5"), Ok(0.5));
        assert_eq!(go_float32("-5"), Ok(-5.0));
        assert_eq!(go_float32("1e2"), Ok(100.0));
        assert_eq!(
            go_float32("fast").unwrap_err().to_string(),
            "strconv.ParseFloat: parsing \"fast\": invalid syntax"
        );
        assert_eq!(go_float64("0.1"), Ok(0.1));
        assert_eq!(go_ip("::1"), Ok("::1".parse().unwrap()));
        assert_eq!(
            go_ip("10.0.0.256").unwrap_err().to_string(),
            "failed to parse IP: \"10.0.0.256\""
        );
        assert_eq!(
            string_to_string("a=1,b=x=y"),
            Ok(Pairs(vec![
                ("a".into(), "1".into()),
                ("b".into(), "x=y".into())
            ]))
        );
        assert_eq!(string_to_string(""), Ok(Pairs(vec![])));
        assert_eq!(
            string_to_string("a=1,b").unwrap_err().to_string(),
            "b must be formatted as key=value"
        );
        assert_eq!(quantity("100Mi"), Ok("100Mi".to_owned()));
        assert_eq!(quantity("lots"), Err(ValueError::Quantity));
        assert_eq!(
            vmodule("sync=4,,informer*=2"),
            Ok(Vmodule(vec![
                VmoduleRule {
                    pattern: "sync".into(),
                    level: 4
                },
                VmoduleRule {
                    pattern: "informer*".into(),
                    level: 2
                },
            ]))
        );
        for bad in ["sync", "=4", "sync=x", "a=1=2"] {
            assert_eq!(vmodule(bad), Err(ValueError::Vmodule), "{bad}");
        }
        assert_eq!(vmodule("sync=-1"), Err(ValueError::VmoduleNegative));
    }

    #[test]
    fn go_bools() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(text), Ok(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(text), Ok(false), "{text}");
        }
        for text in ["", "yes", "tRUE", " true", "2"] {
            assert!(parse_go_bool(text).is_err(), "{text}");
        }
    }

    #[test]
    fn duration_parsing_table() {
        let nanos = Duration::from_nanos;
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("300ms", Duration::from_millis(300)),
            ("15s", secs(15)),
            ("+15s", secs(15)),
            ("1m30s", secs(90)),
            ("5m0s", secs(300)),
            ("1h", secs(3600)),
            ("1h0m0s", secs(3600)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("1.s", secs(1)),
            ("1.5h", secs(5400)),
            ("2h45m", secs(9900)),
            ("1ns", nanos(1)),
            ("1us", nanos(1_000)),
            ("1µs", nanos(1_000)),
            ("1μs", nanos(1_000)),
            ("1.0000000019s", nanos(1_000_000_001)),
            ("0.5h", secs(1800)),
            ("0.333333333333333333333333s", nanos(333_333_333)),
            ("10s5s", secs(15)),
            ("9223372036854775807ns", nanos(i64::MAX as u64)),
            ("2562047h47m16.854775807s", nanos(i64::MAX as u64)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_duration(text).as_ref(), Ok(expected), "{text}");
        }

        let errors: &[(&str, DurationParseError)] = &[
            ("", DurationParseError::Invalid(String::new())),
            ("-", DurationParseError::Invalid("-".to_owned())),
            ("+", DurationParseError::Invalid("+".to_owned())),
            (".", DurationParseError::Invalid(".".to_owned())),
            (".s", DurationParseError::Invalid(".s".to_owned())),
            ("s", DurationParseError::Invalid("s".to_owned())),
            ("1.5.s", DurationParseError::MissingUnit("1.5.s".to_owned())),
            ("5", DurationParseError::MissingUnit("5".to_owned())),
            ("1h5", DurationParseError::MissingUnit("1h5".to_owned())),
            ("00", DurationParseError::MissingUnit("00".to_owned())),
            (
                "3x",
                DurationParseError::UnknownUnit {
                    unit: "x".to_owned(),
                    text: "3x".to_owned(),
                },
            ),
            (
                "1 s",
                DurationParseError::UnknownUnit {
                    unit: " s".to_owned(),
                    text: "1 s".to_owned(),
                },
            ),
            (
                "1S",
                DurationParseError::UnknownUnit {
                    unit: "S".to_owned(),
                    text: "1S".to_owned(),
                },
            ),
            ("-1s", DurationParseError::Negative("-1s".to_owned())),
            ("--1s", DurationParseError::Invalid("--1s".to_owned())),
            (
                "9223372036854775808ns",
                DurationParseError::OutOfRange("9223372036854775808ns".to_owned()),
            ),
            (
                "2562048h",
                DurationParseError::OutOfRange("2562048h".to_owned()),
            ),
            (
                "99999999999999999999999999999999999999999s",
                DurationParseError::OutOfRange(
                    "99999999999999999999999999999999999999999s".to_owned(),
                ),
            ),
        ];
        for (text, expected) in errors {
            assert_eq!(parse_go_duration(text).as_ref(), Err(expected), "{text:?}");
        }
    }

    #[test]
    fn durations_display_the_go_way() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(2), "2µs"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_nanos(1_500_000), "1.5ms"),
            (secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(2400), "2.4s"),
            (secs(15), "15s"),
            (secs(90), "1m30s"),
            (secs(300), "5m0s"),
            (secs(3600), "1h0m0s"),
            (secs(9900) + Duration::from_millis(500), "2h45m0.5s"),
            (
                Duration::from_nanos(i64::MAX as u64),
                "2562047h47m16.854775807s",
            ),
            (Duration::MAX, "5124095576030431h0m15.999999999s"),
        ];
        for (duration, expected) in cases {
            let shown = GoDuration(*duration).to_string();
            assert_eq!(shown, *expected);
            if duration.as_nanos() <= MAX_GO_DURATION_NANOS {
                assert_eq!(parse_go_duration(&shown), Ok(*duration), "{shown}");
            }
        }
    }
}
