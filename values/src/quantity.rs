//! A port of apimachinery's `resource.Quantity` (k8s.io/apimachinery/pkg/api/resource):
//! parsing, `Add`/`Sub`/`Mul`, `Cmp`, `RoundUp(0)`, `Value`/`MilliValue` and the
//! canonical `String()` form. The ResourceQuota controller writes `status.used` from
//! these strings, so they have to match upstream byte for byte.
//!
//! The value is an `i128` count of nano-units. Upstream rounds every parsed value to
//! a whole nano (away from zero) and its arithmetic is exact, so all of its values are
//! whole nanos. `i128` holds magnitudes up to about 1.7e29, which covers any real
//! quota. Larger inputs give `QuantityError::OutOfRange`, and arithmetic that would
//! go past that range returns `None`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_UNIT_U128: u128 = NANOS_PER_UNIT.unsigned_abs();
/// Upstream caps a parsed BinarySI magnitude at 2^63-1 (its `maxAllowed`).
const BINARY_CAP_NANOS: i128 = (i64::MAX as i128) * NANOS_PER_UNIT;
/// The binary suffixes, indexed by power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
/// The characters upstream's scanner accepts in a suffix before an optional signed number.
const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";

/// How a quantity is written out. Upstream remembers the kind of suffix it was parsed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12M` (12 * 10^6); also `n u m k G T P E`.
    DecimalSI,
    /// `12Mi` (12 * 2^20).
    BinarySI,
    /// `12e6`.
    DecimalExponent,
}

/// A parse failure. `Display` gives upstream's message for each of its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// Upstream `ErrFormatWrong`.
    FormatWrong,
    /// Upstream `ErrNumeric`.
    Numeric,
    /// Upstream `ErrSuffix`.
    Suffix,
    /// Valid for upstream, but too large to hold exactly here (about 1.7e29 or more).
    OutOfRange,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FormatWrong => {
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            Self::Numeric => "unable to parse numeric part of quantity",
            Self::Suffix => "unable to parse quantity's suffix",
            Self::OutOfRange => "quantity is too large to be represented exactly",
        })
    }
}

impl std::error::Error for QuantityError {}

/// An exact quantity plus its format. Equality, ordering and hashing look only at
/// the value, as upstream's `Cmp` does, so `1` == `1000m`.
#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
    /// The input text, when upstream's parser keeps it as the `String()` value.
    /// It is dropped by every operation that changes the value. Shared, so a copy of a
    /// parsed quantity (usage sums copy each several times) allocates nothing.
    cached: Option<Arc<str>>,
}

impl Quantity {
    /// `0` in DecimalSI, like `resource.Quantity{Format: DecimalSI}`.
    pub fn zero() -> Self {
        Self::from_nanos(0, Format::DecimalSI)
    }

    /// `resource.NewQuantity(value, format)`.
    pub fn from_integer(value: i64, format: Format) -> Self {
        // Cannot overflow: |i64| * 1e9 < 1e29.
        Self::from_nanos(i128::from(value).saturating_mul(NANOS_PER_UNIT), format)
    }

    /// `resource.NewMilliQuantity(value, format)`.
    pub fn from_milli(value: i64, format: Format) -> Self {
        Self::from_nanos(i128::from(value).saturating_mul(1_000_000), format)
    }

    /// An exact value in nanounits (10^-9), printed in `format`.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Self {
            nanos,
            format,
            cached: None,
        }
    }

    /// The exact value in nanounits (10^-9).
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// `Add`: the result keeps `self`'s format, except that a zero `self` takes
    /// `other`'s format (so `0 + 128Mi` prints `128Mi`). `None` past the exact range.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_add(other.nanos)?;
        Some(Self::from_nanos(nanos, self.format_after_op(other)))
    }

    /// `Sub`, with the same format rule as [`Quantity::checked_add`].
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        let nanos = self.nanos.checked_sub(other.nanos)?;
        Some(Self::from_nanos(nanos, self.format_after_op(other)))
    }

    fn format_after_op(&self, other: &Quantity) -> Format {
        if self.nanos == 0 {
            other.format
        } else {
            self.format
        }
    }

    /// `Mul(n)`: exact, format unchanged. `None` past the exact range.
    pub fn checked_mul_int(&self, n: i64) -> Option<Quantity> {
        let nanos = self.nanos.checked_mul(i128::from(n))?;
        Some(Self::from_nanos(nanos, self.format))
    }

    /// quota's `Max`: `b` unless `a` is strictly greater, so ties take `b` (and its format).
    pub fn max(a: &Quantity, b: &Quantity) -> Quantity {
        if a.nanos > b.nanos {
            a.clone()
        } else {
            b.clone()
        }
    }

    /// `RoundUp(0)`: rounds away from zero to a whole number, keeping the format
    /// (`1001m` -> `2`, `-9.01` -> `-10`). The PVC evaluator charges
    /// `requests.storage` this way. An already whole value is returned unchanged,
    /// text included, as upstream keeps its cached string then.
    pub fn round_up_to_integer(&self) -> Quantity {
        if self.nanos % NANOS_PER_UNIT == 0 {
            return self.clone();
        }
        let units = div_away_from_zero(self.nanos, NANOS_PER_UNIT);
        Self::from_nanos(units.saturating_mul(NANOS_PER_UNIT), self.format)
    }

    /// `MilliValue()`: the value in thousandths, rounded away from zero. Upstream
    /// returns an int64 that silently overflows; this never does.
    pub fn milli_value(&self) -> i128 {
        div_away_from_zero(self.nanos, 1_000_000)
    }

    /// `Value()`: the value rounded away from zero to a whole number (`1n` -> 1).
    pub fn value_ceil(&self) -> i128 {
        div_away_from_zero(self.nanos, NANOS_PER_UNIT)
    }

    pub fn to_k8s(&self) -> K8sQuantity {
        K8sQuantity(self.to_string())
    }
}

/// `n / d` rounded away from zero, for a positive `d`.
fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let (Some(quotient), Some(rem)) = (n.checked_div(d), n.checked_rem(d)) else {
        return 0;
    };
    match rem.cmp(&0) {
        Ordering::Greater => quotient.saturating_add(1),
        Ordering::Less => quotient.saturating_sub(1),
        Ordering::Equal => quotient,
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Self::zero()
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

/// Upstream `String()`: the cached input text if the parser kept it, otherwise the
/// canonical form.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = &self.cached {
            return f.write_str(text);
        }
        if self.nanos == 0 {
            return f.write_str("0");
        }
        if self.nanos < 0 {
            f.write_str("-")?;
        }
        let magnitude = self.nanos.unsigned_abs();
        // BinarySI is only used for whole values of at least 1024; anything else would
        // lose precision or look odd, so upstream prints it as DecimalSI.
        let binary = self.format == Format::BinarySI
            && magnitude >= NANOS_PER_UNIT_U128 * 1024
            && magnitude.is_multiple_of(NANOS_PER_UNIT_U128);
        if binary {
            let mut units = magnitude / NANOS_PER_UNIT_U128;
            let mut power = 0usize;
            while units >= 1024 && units.is_multiple_of(1024) {
                units /= 1024;
                power = power.saturating_add(1);
            }
            // Past Ei upstream finds no suffix and prints none, so do the same.
            let suffix = BINARY_SUFFIXES.get(power).copied().unwrap_or("");
            return write!(f, "{units}{suffix}");
        }
        // Drop trailing zeros three at a time: the exponent stays a multiple of 3 and
        // is as large as possible with an integer mantissa.
        let mut mantissa = magnitude;
        let mut exponent: i32 = -9;
        while mantissa.is_multiple_of(1000) {
            mantissa /= 1000;
            exponent = exponent.saturating_add(3);
        }
        write!(f, "{mantissa}")?;
        let si_suffix = match exponent {
            -9 => Some("n"),
            -6 => Some("u"),
            -3 => Some("m"),
            0 => Some(""),
            3 => Some("k"),
            6 => Some("M"),
            9 => Some("G"),
            12 => Some("T"),
            15 => Some("P"),
            18 => Some("E"),
            _ => None,
        };
        match (self.format, si_suffix) {
            (Format::DecimalSI | Format::BinarySI, Some(suffix)) => f.write_str(suffix),
            _ if exponent == 0 => Ok(()),
            // DecimalExponent, and DecimalSI past E, which upstream writes as `1e21`.
            _ => write!(f, "e{exponent}"),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// `resource.ParseQuantity`: no whitespace is allowed.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

/// Parses like upstream's JSON decoding, which trims surrounding whitespace first.
impl TryFrom<&K8sQuantity> for Quantity {
    type Error = QuantityError;

    fn try_from(q: &K8sQuantity) -> Result<Self, Self::Error> {
        parse_quantity(q.0.trim())
    }
}

impl From<&Quantity> for K8sQuantity {
    fn from(q: &Quantity) -> Self {
        q.to_k8s()
    }
}

/// The pieces upstream's `parseQuantityString` finds.
struct Scanned<'a> {
    positive: bool,
    /// Integer digits without leading zeros; `0` when there are none.
    num: &'a [u8],
    /// Fraction digits.
    denom: &'a [u8],
    suffix: &'a [u8],
    /// Whether any digit came before the suffix; upstream's slow path needs one.
    has_digits: bool,
}

fn skip_digits(s: &[u8], mut pos: usize) -> usize {
    while s.get(pos).is_some_and(u8::is_ascii_digit) {
        pos = pos.saturating_add(1);
    }
    pos
}

/// Upstream's scanner: `[+-]?0*[0-9]*(\.[0-9]*)?[eEinumkKMGTP]*[-+]?[0-9]*`, anything
/// left over is `ErrFormatWrong`. The suffix itself is checked later.
fn scan(s: &[u8]) -> Result<Scanned<'_>, QuantityError> {
    let mut out = Scanned {
        positive: true,
        num: b"0",
        denom: b"",
        suffix: b"",
        has_digits: false,
    };
    let mut pos = 0;
    match s.first() {
        Some(b'-') => {
            out.positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while s.get(pos) == Some(&b'0') {
        pos = pos.saturating_add(1);
        out.has_digits = true;
    }
    if pos >= s.len() {
        return Ok(out);
    }
    let start = pos;
    pos = skip_digits(s, pos);
    let num = s.get(start..pos).unwrap_or_default();
    if !num.is_empty() {
        out.num = num;
        out.has_digits = true;
    }
    if pos >= s.len() {
        return Ok(out);
    }
    if s.get(pos) == Some(&b'.') {
        let start = pos.saturating_add(1);
        pos = skip_digits(s, start);
        out.denom = s.get(start..pos).unwrap_or_default();
        out.has_digits |= !out.denom.is_empty();
        if pos >= s.len() {
            return Ok(out);
        }
    }
    let suffix_start = pos;
    while s.get(pos).is_some_and(|c| SUFFIX_CHARS.contains(c)) {
        pos = pos.saturating_add(1);
    }
    if matches!(s.get(pos), Some(b'-' | b'+')) {
        pos = pos.saturating_add(1);
    }
    if skip_digits(s, pos) < s.len() {
        return Err(QuantityError::FormatWrong);
    }
    out.suffix = s.get(suffix_start..).unwrap_or_default();
    Ok(out)
}

/// The format and exponent a suffix stands for: base 2 for BinarySI, else base 10.
fn interpret(suffix: &[u8]) -> Option<(Format, i32)> {
    let (format, exponent) = match suffix {
        b"n" => (Format::DecimalSI, -9),
        b"u" => (Format::DecimalSI, -6),
        b"m" => (Format::DecimalSI, -3),
        b"" => (Format::DecimalSI, 0),
        b"k" => (Format::DecimalSI, 3),
        b"M" => (Format::DecimalSI, 6),
        b"G" => (Format::DecimalSI, 9),
        b"T" => (Format::DecimalSI, 12),
        b"P" => (Format::DecimalSI, 15),
        b"E" => (Format::DecimalSI, 18),
        b"Ki" => (Format::BinarySI, 10),
        b"Mi" => (Format::BinarySI, 20),
        b"Gi" => (Format::BinarySI, 30),
        b"Ti" => (Format::BinarySI, 40),
        b"Pi" => (Format::BinarySI, 50),
        b"Ei" => (Format::BinarySI, 60),
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            // Same acceptance as Go's strconv.ParseInt(rest, 10, 64).
            let parsed: i64 = std::str::from_utf8(rest).ok()?.parse().ok()?;
            // Upstream narrows with int32(parsed), wrapping huge exponents.
            (Format::DecimalExponent, parsed as i32)
        }
        _ => return None,
    };
    Some((format, exponent))
}

fn len_i64(s: &[u8]) -> i64 {
    i64::try_from(s.len()).unwrap_or(i64::MAX)
}

/// Whether upstream takes its int64 fast path, and if so whether it keeps the input
/// text as `String()`: `None` for the slow (inf.Dec) path, else `Some(keep_text)`.
/// The value is the same on both paths; they differ only in the cached text and in
/// the slow path's `ErrNumeric` when there are no digits at all.
fn fast_path(sc: &Scanned<'_>, format: Format, exponent: i32) -> Option<bool> {
    if format == Format::BinarySI {
        // precision = 15 - len(num) - exponent*3/10 - 1 must not be negative.
        let digits_allowed =
            usize::try_from(14i32.checked_sub(exponent.checked_mul(3)? / 10)?).ok()?;
        if !sc.denom.is_empty() || sc.num.len() > digits_allowed {
            return None;
        }
        let value: i64 = std::str::from_utf8(sc.num).ok()?.parse().ok()?;
        value.checked_mul(1i64.checked_shl(u32::try_from(exponent).ok()?)?)?;
        return Some(value & 7 != 0);
    }
    let scale = i64::from(exponent).saturating_sub(len_i64(sc.denom));
    if sc.num.len().saturating_add(sc.denom.len()) > 18 || scale < -9 {
        return None;
    }
    // The digits of num then denom, read in place rather than joined into a new string.
    let digits = || sc.num.iter().chain(sc.denom);
    let ends_in_000 = digits().rev().take(3).filter(|&&c| c == b'0').count() == 3;
    Some(scale % 3 == 0 && !ends_in_000 && digits().next() != Some(&b'0'))
}

/// `ceil(D * 2^bin_exp * 10^shift)` for the integer `D` spelled by `num` then `denom`,
/// or `None` if that exceeds `i128::MAX`. Works on decimal digits so that any input
/// length is exact.
fn scaled_magnitude(num: &[u8], denom: &[u8], bin_exp: u32, shift: i64) -> Option<i128> {
    scaled_magnitude_in_u128(num, denom, bin_exp, shift)
        .or_else(|| scaled_magnitude_by_digits(num, denom, bin_exp, shift))
}

/// [`scaled_magnitude`] digit by digit, exact at any length.
fn scaled_magnitude_by_digits(num: &[u8], denom: &[u8], bin_exp: u32, shift: i64) -> Option<i128> {
    // Little-endian digit values, leading zeros dropped.
    let mut digits: Vec<u8> = num
        .iter()
        .chain(denom)
        .skip_while(|&&c| c == b'0')
        .map(|c| c.saturating_sub(b'0'))
        .collect();
    digits.reverse();
    if digits.is_empty() {
        return Some(0);
    }
    if bin_exp > 0 {
        let factor = 1u128.checked_shl(bin_exp)?;
        let mut carry = 0u128;
        for digit in &mut digits {
            let v = u128::from(*digit).checked_mul(factor)?.checked_add(carry)?;
            *digit = u8::try_from(v % 10).ok()?;
            carry = v / 10;
        }
        while carry > 0 {
            digits.push(u8::try_from(carry % 10).ok()?);
            carry /= 10;
        }
    }
    // With a negative shift the low digits are a fraction of a nano: drop them and
    // round the rest up if any was non-zero (D is non-zero, so all-fraction means 1).
    let (whole, round_up): (&[u8], bool) = if shift >= 0 {
        (&digits, false)
    } else {
        let drop = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
        match digits.split_at_checked(drop) {
            Some((fraction, whole)) => (whole, fraction.iter().any(|&d| d != 0)),
            None => (&[], true),
        }
    };
    let mut value: i128 = 0;
    for &digit in whole.iter().rev() {
        value = value.checked_mul(10)?.checked_add(i128::from(digit))?;
    }
    if shift > 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?;
    }
    if round_up {
        value = value.checked_add(1)?;
    }
    Some(value)
}

/// [`scaled_magnitude`] in 128-bit arithmetic, without the digit list: the answer for nearly
/// every quantity (`100m`, `128Mi`), computed on every pod change. `None` whenever a step
/// overflows, so the digit path decides those exactly.
fn scaled_magnitude_in_u128(num: &[u8], denom: &[u8], bin_exp: u32, shift: i64) -> Option<i128> {
    let d = num.iter().chain(denom).try_fold(0u128, |acc, &c| {
        acc.checked_mul(10)?
            .checked_add(u128::from(c.saturating_sub(b'0')))
    })?;
    let x = d.checked_mul(1u128.checked_shl(bin_exp)?)?;
    let power = |n: u64| 10u128.checked_pow(u32::try_from(n).ok()?);
    let value = if shift >= 0 {
        x.checked_mul(power(shift.unsigned_abs())?)?
    } else {
        let divisor = power(shift.unsigned_abs())?;
        x / divisor + u128::from(x % divisor != 0)
    };
    i128::try_from(value).ok()
}

/// `resource.ParseQuantity`.
fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    if s == "0" {
        let mut zero = Quantity::zero();
        zero.cached = Some(Arc::from(s));
        return Ok(zero);
    }
    let sc = scan(s.as_bytes())?;
    let (mut format, exponent) = interpret(sc.suffix).ok_or(QuantityError::Suffix)?;
    let fast = fast_path(&sc, format, exponent);
    if fast.is_none() && !sc.has_digits {
        return Err(QuantityError::Numeric);
    }
    let denom_digits = len_i64(sc.denom);
    let (bin_exp, shift) = if format == Format::BinarySI {
        (
            u32::try_from(exponent).unwrap_or(0),
            9i64.saturating_sub(denom_digits),
        )
    } else {
        let shift = i64::from(exponent)
            .saturating_add(9)
            .saturating_sub(denom_digits);
        (0, shift)
    };
    let magnitude = match (scaled_magnitude(sc.num, sc.denom, bin_exp, shift), format) {
        (Some(m), Format::BinarySI) => m.min(BINARY_CAP_NANOS),
        (None, Format::BinarySI) => BINARY_CAP_NANOS,
        (Some(m), _) => m,
        (None, _) => return Err(QuantityError::OutOfRange),
    };
    // A non-zero BinarySI value below one unit is kept as DecimalSI.
    if format == Format::BinarySI && magnitude > 0 && magnitude < NANOS_PER_UNIT {
        format = Format::DecimalSI;
    }
    let nanos = if sc.positive {
        magnitude
    } else {
        magnitude.saturating_neg()
    };
    let mut q = Quantity::from_nanos(nanos, format);
    if fast == Some(true) {
        q.cached = Some(Arc::from(s));
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::Format::{BinarySI as BIN, DecimalExponent as EXP, DecimalSI as DEC};
    use super::*;

    const MOST_POSITIVE: i128 = i64::MAX as i128;
    const MOST_NEGATIVE: i128 = i64::MIN as i128;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    /// Wherever the 128-bit path answers, it is the digit path's answer: rounding of dropped
    /// fractions, leading zeros, and the edges of the range.
    #[test]
    fn the_128_bit_magnitude_is_the_digit_magnitude() {
        let digit_strings = [
            "",
            "0",
            "00",
            "1",
            "7",
            "10",
            "100",
            "999",
            "1000",
            "00123",
            "123456789",
            "170141183460469231731687303715884105727",
            "99999999999999999999999999999999999999",
        ];
        let mut answered = 0;
        for num in digit_strings {
            for denom in ["", "0", "5", "001", "25", "999999999"] {
                for bin_exp in [0, 1, 10, 20, 60, 64, 100, 127, 128] {
                    for shift in [-40, -39, -12, -9, -3, -1, 0, 1, 3, 9, 12, 30, 38, 39] {
                        let (num, denom) = (num.as_bytes(), denom.as_bytes());
                        let fast = scaled_magnitude_in_u128(num, denom, bin_exp, shift);
                        let exact = scaled_magnitude_by_digits(num, denom, bin_exp, shift);
                        if fast.is_some() {
                            answered += 1;
                            assert_eq!(fast, exact, "{num:?} {denom:?} 2^{bin_exp} 10^{shift}");
                        }
                    }
                }
            }
        }
        assert!(
            answered > 3000,
            "the 128-bit path answered only {answered} cases"
        );
    }

    /// upstream's `decQuantity(m, exp, format)`: m * 10^exp, which must be whole nanos.
    fn dq(m: i128, exp: i32, format: Format) -> Quantity {
        let shift = exp + 9;
        let nanos = if shift >= 0 {
            m * 10i128.pow(shift as u32)
        } else {
            let div = 10i128.pow((-shift) as u32);
            assert_eq!(m % div, 0, "{m}e{exp} is not whole nanos");
            m / div
        };
        Quantity::from_nanos(nanos, format)
    }

    fn add(a: &Quantity, b: &Quantity) -> Quantity {
        a.checked_add(b).unwrap()
    }

    fn sub(a: &Quantity, b: &Quantity) -> Quantity {
        a.checked_sub(b).unwrap()
    }

    #[test]
    fn required_cases() {
        assert_eq!(add(&q("100m"), &q("900m")).to_string(), "1");
        assert_eq!(add(&q("1Gi"), &q("512Mi")).to_string(), "1536Mi");
        assert_eq!(q("0").to_string(), "0");
        assert_eq!(Quantity::zero().to_string(), "0");
        assert_eq!(q("1.5").to_string(), "1500m");
        assert_eq!(add(&q("1Gi"), &q("1Gi")).to_string(), "2Gi");
        assert_eq!(add(&q("500m"), &q("500m")).to_string(), "1");
        assert_eq!(add(&q("1"), &q("500m")).to_string(), "1500m");
        assert_eq!(add(&q("128Mi"), &q("128Mi")).to_string(), "256Mi");
        assert_eq!(add(&q("1G"), &q("1Gi")).to_string(), "2073741824");
        assert_eq!(add(&q("1Gi"), &q("1G")).to_string(), "2073741824");
        assert_eq!(sub(&q("10Gi"), &q("10Gi")).to_string(), "0");
        assert_eq!(sub(&q("5"), &q("10")).to_string(), "-5");
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_ne!(q("1k"), q("1Ki"));
        assert_eq!(q("1.5Ki").to_string(), "1536");
        assert_eq!(q("0.5Gi").to_string(), "512Mi");
        assert_eq!(Quantity::from_milli(100, BIN).to_string(), "100m");
        assert_eq!(q("1000m").to_string(), "1");
        assert_eq!(q("1500m").to_string(), "1500m");
        assert_eq!(q("2000").to_string(), "2k");
        assert_eq!(q("1e3").to_string(), "1e3");
        assert_eq!(q("-100m").to_string(), "-100m");
        assert_eq!(Quantity::from_integer(5, DEC).to_string(), "5");
    }

    #[test]
    fn usage_sum_starting_from_zero_takes_the_first_format() {
        // CalculateUsageStats starts every resource at a DecimalSI zero.
        let mut used = Quantity::zero();
        for mem in ["128Mi", "128Mi", "256Mi"] {
            used = add(&used, &q(mem));
        }
        assert_eq!(used.format(), BIN);
        assert_eq!(used.to_string(), "512Mi");
        let cpu = add(&add(&Quantity::zero(), &q("250m")), &q("750m"));
        assert_eq!(cpu.to_string(), "1");
        let pods = add(&Quantity::zero(), &Quantity::from_integer(3, DEC));
        assert_eq!(pods.to_string(), "3");
    }

    /// TestQuantityParse: value and format, also with "-" and "+" in front.
    #[test]
    fn parse_table() {
        let table = [
            ("0", dq(0, 0, DEC)),
            ("0n", dq(0, 0, DEC)),
            ("0u", dq(0, 0, DEC)),
            ("0m", dq(0, 0, DEC)),
            ("0Ki", dq(0, 0, BIN)),
            ("0k", dq(0, 0, DEC)),
            ("0Mi", dq(0, 0, BIN)),
            ("0M", dq(0, 0, DEC)),
            ("0Gi", dq(0, 0, BIN)),
            ("0G", dq(0, 0, DEC)),
            ("0Ti", dq(0, 0, BIN)),
            ("0T", dq(0, 0, DEC)),
            // Quantity less numbers are allowed
            ("1", dq(1, 0, DEC)),
            // Binary suffixes
            ("1Ki", dq(1024, 0, BIN)),
            ("8Ki", dq(8 * 1024, 0, BIN)),
            ("7Mi", dq(7 << 20, 0, BIN)),
            ("6Gi", dq(6 << 30, 0, BIN)),
            ("5Ti", dq(5 << 40, 0, BIN)),
            ("4Pi", dq(4 << 50, 0, BIN)),
            ("3Ei", dq(3 << 60, 0, BIN)),
            ("10Ti", dq(10 << 40, 0, BIN)),
            ("100Ti", dq(100 << 40, 0, BIN)),
            // Decimal suffixes
            ("5n", dq(5, -9, DEC)),
            ("4u", dq(4, -6, DEC)),
            ("3m", dq(3, -3, DEC)),
            ("9", dq(9, 0, DEC)),
            ("8k", dq(8, 3, DEC)),
            ("50k", dq(5, 4, DEC)),
            ("7M", dq(7, 6, DEC)),
            ("6G", dq(6, 9, DEC)),
            ("5T", dq(5, 12, DEC)),
            ("40T", dq(4, 13, DEC)),
            ("300T", dq(3, 14, DEC)),
            ("2P", dq(2, 15, DEC)),
            ("1E", dq(1, 18, DEC)),
            // Decimal exponents
            ("1E-3", dq(1, -3, EXP)),
            ("1e3", dq(1, 3, EXP)),
            ("1E6", dq(1, 6, EXP)),
            ("1e9", dq(1, 9, EXP)),
            ("1E12", dq(1, 12, EXP)),
            ("1e15", dq(1, 15, EXP)),
            ("1E18", dq(1, 18, EXP)),
            // Nonstandard but still parsable
            ("1e14", dq(1, 14, EXP)),
            ("1e13", dq(1, 13, EXP)),
            ("1e3", dq(1, 3, EXP)),
            ("100.035k", dq(100035, 0, DEC)),
            // Things that look like floating point
            ("0.001", dq(1, -3, DEC)),
            ("0.0005k", dq(5, -1, DEC)),
            ("0.005", dq(5, -3, DEC)),
            ("0.05", dq(5, -2, DEC)),
            ("0.5", dq(5, -1, DEC)),
            ("0.00050k", dq(5, -1, DEC)),
            ("0.00500", dq(5, -3, DEC)),
            ("0.05000", dq(5, -2, DEC)),
            ("0.50000", dq(5, -1, DEC)),
            ("0.5e0", dq(5, -1, EXP)),
            ("0.5e-1", dq(5, -2, EXP)),
            ("0.5e-2", dq(5, -3, EXP)),
            ("0.5e0", dq(5, -1, EXP)),
            ("10.035M", dq(10035, 3, DEC)),
            ("1.2e3", dq(12, 2, EXP)),
            ("1.3E+6", dq(13, 5, EXP)),
            ("1.40e9", dq(14, 8, EXP)),
            ("1.53E12", dq(153, 10, EXP)),
            ("1.6e15", dq(16, 14, EXP)),
            ("1.7E18", dq(17, 17, EXP)),
            ("9.01", dq(901, -2, DEC)),
            ("8.1k", dq(81, 2, DEC)),
            ("7.123456M", dq(7123456, 0, DEC)),
            ("6.987654321G", dq(6987654321, 0, DEC)),
            ("5.444T", dq(5444, 9, DEC)),
            ("40.1T", dq(401, 11, DEC)),
            ("300.2T", dq(3002, 11, DEC)),
            ("2.5P", dq(25, 14, DEC)),
            ("1.01E", dq(101, 16, DEC)),
            // Things that saturate/round
            ("3.001n", dq(4, -9, DEC)),
            ("1.1E-9", dq(2, -9, EXP)),
            ("0.0000000001", dq(1, -9, DEC)),
            ("0.0000000005", dq(1, -9, DEC)),
            ("0.00000000050", dq(1, -9, DEC)),
            ("0.5e-9", dq(1, -9, EXP)),
            ("0.9n", dq(1, -9, DEC)),
            ("0.00000012345", dq(124, -9, DEC)),
            ("0.00000012354", dq(124, -9, DEC)),
            ("9Ei", dq(MOST_POSITIVE, 0, BIN)),
            ("9223372036854775807Ki", dq(MOST_POSITIVE, 0, BIN)),
            ("12E", dq(12, 18, DEC)),
            // We'll accept fractional binary stuff, too.
            ("100.035Ki", dq(10243584, -2, BIN)),
            ("0.5Mi", dq(512 * 1024, 0, BIN)),
            ("0.05Gi", dq(536870912, -1, BIN)),
            ("0.025Ti", dq(274877906944, -1, BIN)),
            // Things written by trolls
            ("0.000000000001Ki", dq(2, -9, DEC)), // rounds up, changes format
            (".001", dq(1, -3, DEC)),
            (".0001k", dq(100, -3, DEC)),
            ("1.", dq(1, 0, DEC)),
            ("1.G", dq(1, 9, DEC)),
        ];
        for (input, expect) in &table {
            let got = q(input);
            assert_eq!(got, *expect, "{input}");
            assert_eq!(got.format(), expect.format(), "{input}");

            let neg = q(&format!("-{input}"));
            assert_eq!(neg.nanos, -expect.nanos, "-{input}");
            assert_eq!(neg.format(), expect.format(), "-{input}");

            let plus = q(&format!("+{input}"));
            assert_eq!(plus, *expect, "+{input}");
            assert_eq!(plus.format(), expect.format(), "+{input}");
        }
    }

    /// TestQuantityParse's invalid list plus TestQuantityParseNonNumericPanic, with
    /// the error upstream gives.
    #[test]
    fn parse_errors() {
        use QuantityError::*;
        let table = [
            ("", FormatWrong),
            ("1.1.M", FormatWrong),
            ("1+1.0M", FormatWrong),
            ("0.1mi", Suffix),
            ("0.1am", FormatWrong),
            ("aoeu", FormatWrong),
            (".5i", Suffix),
            ("1i", Suffix),
            ("-3.01i", Suffix),
            ("-3.01e-", Suffix),
            (" 1", FormatWrong),
            ("1 ", FormatWrong),
            ("Non-Numeric", FormatWrong),
            ("abc", FormatWrong),
            ("1.5.5", FormatWrong),
            ("5Mii", Suffix),
            ("1e", Suffix),
            ("1ki", Suffix),
            ("1KI", FormatWrong),
            ("1e1.5", FormatWrong),
            ("1e99999999999999999999", Suffix),
            ("1\u{a0}", FormatWrong),
            ("１", FormatWrong),
            // No digits, on the path where upstream parses with inf.Dec.
            ("Ei", Numeric),
            (".Pi", Numeric),
            ("-e-10", Numeric),
            // Valid upstream, but beyond the exact range.
            ("1e30", OutOfRange),
            ("200000000000000000000000000000", OutOfRange),
            ("-1e100", OutOfRange),
        ];
        for (input, err) in table {
            assert_eq!(input.parse::<Quantity>().unwrap_err(), err, "{input:?}");
        }
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
        assert_eq!(
            QuantityError::Numeric.to_string(),
            "unable to parse numeric part of quantity"
        );
    }

    /// TestQuantityString: canonical text, the parser caching canonical input,
    /// alternates canonicalising to it, and negatives.
    #[test]
    fn string_table() {
        let table = [
            (dq(1 << 30, 0, BIN), "1Gi", "1024Mi"),
            (dq(300 << 20, 0, BIN), "300Mi", "307200Ki"),
            (dq(6 * 1024, 0, BIN), "6Ki", ""),
            (dq(1001 << 30, 0, BIN), "1001Gi", "1025024Mi"),
            (dq(1 << 40, 0, BIN), "1Ti", "1024Gi"),
            (dq(5, 0, BIN), "5", "5000m"),
            (dq(500, -3, BIN), "500m", "0.5"),
            (dq(1, 9, DEC), "1G", "1000M"),
            (dq(1000, 6, DEC), "1G", "0.001T"),
            (dq(1000000, 3, DEC), "1G", ""),
            (dq(1000000000, 0, DEC), "1G", ""),
            (dq(1, -3, DEC), "1m", "1000u"),
            (dq(80, -3, DEC), "80m", ""),
            (dq(1080, -3, DEC), "1080m", "1.08"),
            (dq(108, -2, DEC), "1080m", "1080000000n"),
            (dq(10800, -4, DEC), "1080m", ""),
            (dq(300, 6, DEC), "300M", ""),
            (dq(1, 12, DEC), "1T", ""),
            (dq(1, 18, DEC), "1E", ""),
            (dq(1, 21, DEC), "1e21", "1000E"),
            (dq(5, 21, DEC), "5e21", "5000E"),
            (dq(1, 24, DEC), "1e24", "1000000E"),
            (dq(1234567, 6, DEC), "1234567M", ""),
            (dq(1234567, -3, BIN), "1234567m", ""),
            (dq(3, 3, DEC), "3k", ""),
            (dq(1025, 0, BIN), "1025", ""),
            (dq(0, 0, DEC), "0", ""),
            (dq(0, 0, BIN), "0", ""),
            (dq(1, 9, EXP), "1e9", ".001e12"),
            (dq(1, -3, EXP), "1e-3", "0.001e0"),
            (dq(1, -9, EXP), "1e-9", "1000e-12"),
            (dq(80, -3, EXP), "80e-3", ""),
            (dq(300, 6, EXP), "300e6", ""),
            (dq(1, 12, EXP), "1e12", ""),
            (dq(1, 3, EXP), "1e3", ""),
            (dq(3, 3, EXP), "3e3", ""),
            (dq(3, 3, DEC), "3k", ""),
            (dq(0, 0, EXP), "0", "00"),
            (dq(1, -9, DEC), "1n", ""),
            (dq(80, -9, DEC), "80n", ""),
            (dq(1080, -9, DEC), "1080n", ""),
            (dq(108, -8, DEC), "1080n", ""),
            (dq(10800, -10, DEC), "1080n", ""),
            (dq(1, -6, DEC), "1u", ""),
            (dq(80, -6, DEC), "80u", ""),
            (dq(1080, -6, DEC), "1080u", ""),
        ];
        for (value, expect, alternate) in &table {
            assert_eq!(value.to_string(), *expect, "{value:?}");
            let parsed = q(expect);
            assert_eq!(parsed.cached.as_deref(), Some(*expect), "cache of {expect}");
            assert_eq!(parsed, *value, "{expect}");
            if !alternate.is_empty() {
                let alt = q(alternate);
                assert_eq!(alt.cached, None, "{alternate}");
                assert_eq!(alt.to_string(), *expect, "{alternate}");
            }
            if !value.is_zero() {
                let neg = Quantity::from_nanos(-value.nanos, value.format);
                assert_eq!(neg.to_string(), format!("-{expect}"));
            }
        }
    }

    /// TestQuantityParseEmit, and the negatives.
    #[test]
    fn parse_emit() {
        let table = [
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
        ];
        for (input, expect) in table {
            assert_eq!(q(input).to_string(), expect, "{input}");
            assert_eq!(q(&format!("-{input}")).to_string(), format!("-{expect}"));
        }
    }

    /// TestParseQuantity: values around the int64 limits and their text.
    #[test]
    fn parse_canonical_table() {
        let table = [
            ("-999999999999999999", ""),
            ("999999999999999999", ""),
            ("-999999999999999999.0", "-999999999999999999"),
            ("999999999999999999.0", "999999999999999999"),
            ("-999999999999999999.1", "-999999999999999999100m"),
            ("999999999999999999.1", "999999999999999999100m"),
            ("-9999999999999999999", ""),
            ("9999999999999999999", ""),
            ("-1E", ""),
            ("1E", ""),
            ("-1000000000000000000", "-1E"),
            ("1000000000000000000", "1E"),
            ("-9999999999999999999.0", "-9999999999999999999"),
            ("9999999999999999999.0", "9999999999999999999"),
            ("-1.0E", "-1E"),
            ("1.0E", "1E"),
            ("-1000000000000000000.0", "-1E"),
            ("1000000000000000000.0", "1E"),
            ("-9999999999999999999000m", "-9999999999999999999"),
            ("9999999999999999999000m", "9999999999999999999"),
            ("-9999999999999999999.1", "-9999999999999999999100m"),
            ("9999999999999999999.1", "9999999999999999999100m"),
            ("-1.0000000000000000001E", "-1000000000000000000100m"),
            ("1.0000000000000000001E", "1000000000000000000100m"),
            ("-1000000000000000000.1", "-1000000000000000000100m"),
            ("1000000000000000000.1", "1000000000000000000100m"),
            ("-1.000000000000000001E", "-1000000000000000001"),
            ("1.000000000000000001E", "1000000000000000001"),
            ("-1000000000000000001", ""),
            ("1000000000000000001", ""),
            ("-10E", ""),
            ("10E", ""),
            ("-10000000000000000000", "-10E"),
            ("10000000000000000000", "10E"),
            ("-10.0E", "-10E"),
            ("10.0E", "10E"),
            ("-10000000000000000000.0", "-10E"),
            ("10000000000000000000.0", "10E"),
            ("-10000000000000000000000m", "-10E"),
            ("10000000000000000000000m", "10E"),
            ("-10.0000000000000000001E", "-10000000000000000000100m"),
            ("10.0000000000000000001E", "10000000000000000000100m"),
            ("-10000000000000000000.1", "-10000000000000000000100m"),
            ("10000000000000000000.1", "10000000000000000000100m"),
            ("-10.000000000000000001E", "-10000000000000000001"),
            ("10.000000000000000001E", "10000000000000000001"),
            ("-10000000000000000001", ""),
            ("10000000000000000001", ""),
            ("-9223372036854775809", ""),
            ("9223372036854775806", ""),
            ("-9223372036854775809.0", "-9223372036854775809"),
            ("9223372036854775806.0", "9223372036854775806"),
            ("-9223372036854775809000m", "-9223372036854775809"),
            ("9223372036854775806000m", "9223372036854775806"),
            ("-9223372036854775809.1", "-9223372036854775809100m"),
            ("9223372036854775806.1", "9223372036854775806100m"),
            ("-9223372036854775808", ""),
            ("9223372036854775807", ""),
            ("-9223372036854775808.0", "-9223372036854775808"),
            ("9223372036854775807.0", "9223372036854775807"),
            ("-9223372036854775808000m", "-9223372036854775808"),
            ("9223372036854775807000m", "9223372036854775807"),
            ("-9223372036854775808.1", "-9223372036854775808100m"),
            ("9223372036854775807.1", "9223372036854775807100m"),
            ("-9223372036854775807", ""),
            ("9223372036854775808", ""),
            ("-9223372036854775807.0", "-9223372036854775807"),
            ("9223372036854775808.0", "9223372036854775808"),
            ("-9223372036854775807000m", "-9223372036854775807"),
            ("9223372036854775808000m", "9223372036854775808"),
            ("-9223372036854775807.1", "-9223372036854775807100m"),
            ("9223372036854775808.1", "9223372036854775808100m"),
        ];
        for (input, canonical) in table {
            let expect = if canonical.is_empty() {
                input
            } else {
                canonical
            };
            assert_eq!(q(input).to_string(), expect, "{input}");
        }
        assert_eq!(
            q("-1000000000000000000.1").nanos,
            -1_000_000_000_000_000_000_100_000_000
        );
    }

    /// TestQuantityCmp and the representable rows of TestQuantityCmpInt64AndDec.
    #[test]
    fn cmp_table() {
        let parsed = [
            ("0", "0", Ordering::Equal),
            ("100m", "50m", Ordering::Greater),
            ("50m", "100m", Ordering::Less),
            ("10000T", "100Gi", Ordering::Greater),
            ("1", "1000m", Ordering::Equal),
            ("1Gi", "1073741824", Ordering::Equal),
            ("-1", "1n", Ordering::Less),
        ];
        for (x, y, want) in parsed {
            assert_eq!(q(x).cmp(&q(y)), want, "{x} vs {y}");
            assert_eq!(q(y).cmp(&q(x)), want.reverse(), "{y} vs {x}");
        }
        let built = [
            (dq(901, -2, DEC), dq(901, -2, DEC), Ordering::Equal),
            (dq(90, -1, DEC), dq(901, -2, DEC), Ordering::Less),
            (dq(901, -2, DEC), dq(900, -2, DEC), Ordering::Greater),
            (dq(0, 0, DEC), dq(0, 0, DEC), Ordering::Equal),
            (dq(0, 1, DEC), dq(0, -1, DEC), Ordering::Equal),
            (dq(800, -3, DEC), dq(1, 0, DEC), Ordering::Less),
            (dq(800, -3, DEC), dq(79, -2, DEC), Ordering::Greater),
            (dq(MOST_POSITIVE, 0, DEC), dq(1, -1, DEC), Ordering::Greater),
            (dq(MOST_POSITIVE, 1, DEC), dq(1, 0, DEC), Ordering::Greater),
            (dq(MOST_POSITIVE, 1, DEC), dq(1, 1, DEC), Ordering::Greater),
            (dq(MOST_POSITIVE, 1, DEC), dq(0, 1, DEC), Ordering::Greater),
            (dq(MOST_NEGATIVE, 0, DEC), dq(0, 0, DEC), Ordering::Less),
            (dq(1, 0, BIN), dq(1000, -3, EXP), Ordering::Equal),
        ];
        for (a, b, want) in &built {
            assert_eq!(a.cmp(b), *want, "{a:?} vs {b:?}");
            assert_eq!(b.cmp(a), want.reverse(), "{b:?} vs {a:?}");
        }
        assert_eq!(Quantity::max(&q("1"), &q("2")).to_string(), "2");
        assert_eq!(Quantity::max(&q("2"), &q("1")).to_string(), "2");
        // Ties take the second argument, as quota.Max does.
        assert_eq!(Quantity::max(&q("1Ki"), &q("1024")).format(), DEC);
        assert_eq!(Quantity::max(&q("1024"), &q("1Ki")).format(), BIN);
    }

    /// TestAdd and TestSub.
    #[test]
    fn add_sub_table() {
        let zero = Quantity::zero();
        let adds = [
            (dq(10, 0, DEC), dq(1, 1, DEC), dq(20, 0, DEC)),
            (dq(10, 0, DEC), dq(1, 0, BIN), dq(11, 0, DEC)),
            (dq(10, 0, BIN), dq(1, 0, DEC), dq(11, 0, BIN)),
            (zero.clone(), dq(50, 0, DEC), dq(50, 0, DEC)),
            (dq(50, 0, DEC), zero.clone(), dq(50, 0, DEC)),
            (zero.clone(), zero.clone(), dq(0, 0, DEC)),
        ];
        for (a, b, want) in &adds {
            let got = add(a, b);
            assert_eq!(got, *want, "{a:?} + {b:?}");
            assert_eq!(got.format(), want.format(), "{a:?} + {b:?}");
        }
        let subs = [
            (dq(10, 0, DEC), dq(1, 1, DEC), dq(0, 0, DEC)),
            (dq(10, 0, DEC), dq(1, 0, BIN), dq(9, 0, DEC)),
            (dq(10, 0, BIN), dq(1, 0, DEC), dq(9, 0, BIN)),
            (zero.clone(), dq(50, 0, DEC), dq(-50, 0, DEC)),
            (dq(50, 0, DEC), zero.clone(), dq(50, 0, DEC)),
            (zero.clone(), zero.clone(), dq(0, 0, DEC)),
        ];
        for (a, b, want) in &subs {
            let got = sub(a, b);
            assert_eq!(got, *want, "{a:?} - {b:?}");
            assert_eq!(got.format(), want.format(), "{a:?} - {b:?}");
        }
        // A zero left operand takes the right operand's format, as upstream.
        assert_eq!(sub(&zero, &q("1Gi")).to_string(), "-1Gi");
        assert_eq!(sub(&q("0Ki"), &q("3")).format(), DEC);
        // A non-zero left operand keeps its format even if the result is zero.
        let zero_bin = sub(&q("1Gi"), &q("1Gi"));
        assert_eq!(zero_bin.format(), BIN);
        assert_eq!(add(&zero_bin, &q("5")).format(), DEC);
        assert_eq!(sub(&q("1Ki"), &q("24")).to_string(), "1k");
        assert_eq!(sub(&q("1Gi"), &q("1")).to_string(), "1073741823");
        assert_eq!(sub(&q("1Gi"), &q("1m")).to_string(), "1073741823999m");
        assert_eq!(sub(&q("1"), &q("1Gi")).to_string(), "-1073741823");
    }

    /// TestQuantityAddZeroPreservesSuffix and TestQuantitySubZeroPreservesSuffix.
    #[test]
    fn zero_preserves_suffix() {
        let zero = q("0");
        for text in ["100m", "1Gi"] {
            let value = q(text);
            assert_eq!(add(&value, &zero).to_string(), text);
            assert_eq!(add(&zero, &value).to_string(), text);
            assert_eq!(sub(&value, &zero).to_string(), text);
            assert_eq!(sub(&zero, &value).to_string(), format!("-{text}"));
        }
    }

    /// TestMul, within the exact range.
    #[test]
    fn mul_table() {
        let zero = Quantity::zero();
        let table = [
            (dq(10, 0, DEC), 10, dq(100, 0, DEC)),
            (dq(10, 0, DEC), 1, dq(10, 0, DEC)),
            (dq(10, 0, BIN), 1, dq(10, 0, BIN)),
            (zero.clone(), 50, dq(0, 0, DEC)),
            (dq(50, 0, DEC), 0, dq(0, 0, DEC)),
            (zero.clone(), 0, dq(0, 0, DEC)),
            (dq(10, 0, DEC), -10, dq(-100, 0, DEC)),
            (dq(-10, 0, DEC), 1, dq(-10, 0, DEC)),
            (dq(10, 0, BIN), -1, dq(-10, 0, BIN)),
            (dq(-50, 0, DEC), 0, dq(0, 0, DEC)),
            (dq(-50, 0, DEC), -50, dq(2500, 0, DEC)),
            (zero.clone(), -50, dq(0, 0, DEC)),
            (dq(MOST_POSITIVE, 0, DEC), 0, dq(0, 1, DEC)),
            (dq(MOST_POSITIVE, 0, DEC), 1, dq(MOST_POSITIVE, 0, DEC)),
            (dq(MOST_POSITIVE, 0, DEC), -1, dq(-MOST_POSITIVE, 0, DEC)),
            (
                dq(MOST_POSITIVE / 2, 0, DEC),
                2,
                dq((MOST_POSITIVE / 2) * 2, 0, DEC),
            ),
            (
                dq(MOST_POSITIVE / -2, 0, DEC),
                -2,
                dq((MOST_POSITIVE / 2) * 2, 0, DEC),
            ),
            (dq(MOST_POSITIVE, 0, DEC), 2, dq(MOST_POSITIVE * 2, 0, DEC)),
            (dq(MOST_POSITIVE, 0, DEC), 10, dq(MOST_POSITIVE, 1, DEC)),
            (dq(MOST_POSITIVE, 0, DEC), -10, dq(-MOST_POSITIVE, 1, DEC)),
            (dq(MOST_NEGATIVE, 0, DEC), 0, dq(0, 1, DEC)),
            (dq(MOST_NEGATIVE, 0, DEC), 1, dq(MOST_NEGATIVE, 0, DEC)),
            (dq(MOST_NEGATIVE, 0, DEC), -1, dq(MOST_POSITIVE + 1, 0, DEC)),
            (dq(MOST_NEGATIVE / 2, 0, DEC), 2, dq(MOST_NEGATIVE, 0, DEC)),
            (
                dq(MOST_NEGATIVE / -2, 0, DEC),
                -2,
                dq(MOST_NEGATIVE, 0, DEC),
            ),
            (dq(MOST_NEGATIVE, 0, DEC), 2, dq(MOST_NEGATIVE * 2, 0, DEC)),
            (dq(MOST_NEGATIVE, 0, DEC), 10, dq(MOST_NEGATIVE, 1, DEC)),
            (
                dq(MOST_NEGATIVE, 0, DEC),
                -10,
                dq(MOST_POSITIVE + 1, 1, DEC),
            ),
        ];
        for (a, n, want) in &table {
            let got = a.checked_mul_int(*n).unwrap();
            assert_eq!(got, *want, "{a:?} * {n}");
            assert_eq!(got.format(), a.format(), "{a:?} * {n}");
        }
        assert_eq!(q("250m").checked_mul_int(3).unwrap().to_string(), "750m");
        assert_eq!(q("64Mi").checked_mul_int(4).unwrap().to_string(), "256Mi");
    }

    /// TestNegAndSubAtMostNegative, TestSubMostNegativeCrossScale and
    /// TestZeroSubMostNegativeInheritsFormat.
    #[test]
    fn most_negative_boundaries() {
        let zero = Quantity::zero();
        let min = Quantity::from_integer(i64::MIN, DEC);
        assert_eq!(sub(&zero, &min).to_string(), "9223372036854775808");
        assert_eq!(sub(&q("1"), &min).to_string(), "9223372036854775809");
        assert_eq!(sub(&dq(1, 1, DEC), &min).to_string(), "9223372036854775818");
        let min_milli = Quantity::from_milli(i64::MIN, DEC);
        assert_eq!(sub(&zero, &min_milli).to_string(), "9223372036854775808m");
        let one_milli = Quantity::from_milli(1, DEC);
        assert_eq!(
            sub(&one_milli, &min_milli).to_string(),
            "9223372036854775809m"
        );
        let inherited = sub(&zero, &Quantity::from_integer(i64::MIN, BIN));
        assert_eq!(inherited.format(), BIN);
        assert_eq!(inherited.to_string(), "8Ei");
        assert_eq!(inherited, q("9223372036854775808"));
        // ParseQuantity caps BinarySI at 2^63-1, so "8Ei" does not round-trip (#140674).
        assert_eq!(q("8Ei").to_string(), "9223372036854775807");
        assert_eq!(q("-8Ei").to_string(), "-9223372036854775807");
        assert_eq!(q("4Ei").to_string(), "4Ei");
        assert_eq!(add(&q("4Ei"), &q("4Ei")).to_string(), "8Ei");
    }

    /// TestQuantityRoundUp at scale 0, plus the PVC evaluator's use.
    #[test]
    fn round_up_to_integer() {
        let table = [
            ("9.01", "10"),
            ("-9.01", "-10"),
            ("1001m", "2"),
            ("1n", "1"),
            ("-1n", "-1"),
            ("5", "5"),
            ("1.5Gi", "1536Mi"),
            ("100.035Ki", "102436"),
            ("1e-3", "1"),
            ("0", "0"),
        ];
        for (input, want) in table {
            let rounded = q(input).round_up_to_integer();
            assert_eq!(rounded.to_string(), want, "{input}");
            assert_eq!(rounded.format(), q(input).format(), "{input}");
        }
        // A whole value keeps upstream's cached text.
        assert_eq!(q("+5").round_up_to_integer().to_string(), "+5");
        let binary = Quantity::from_milli(1500, BIN).round_up_to_integer();
        assert_eq!((binary.format(), binary.to_string()), (BIN, "2".to_owned()));
    }

    /// Value() and MilliValue() round away from zero (TestScaledValue and friends).
    #[test]
    fn value_and_milli_value() {
        let table = [
            ("1n", 1, 1),
            ("1u", 1, 1),
            ("1m", 1, 1),
            ("1", 1, 1000),
            ("1.001", 2, 1001),
            ("1500m", 2, 1500),
            ("-1.5", -2, -1500),
            ("-1n", -1, -1),
            ("0", 0, 0),
            ("1Mi", 1 << 20, 1000 << 20),
            (
                "1E",
                1_000_000_000_000_000_000,
                1_000_000_000_000_000_000_000,
            ),
            (
                "100E",
                100_000_000_000_000_000_000,
                100_000_000_000_000_000_000_000,
            ),
        ];
        for (input, value, milli) in table {
            assert_eq!(q(input).value_ceil(), value, "{input}");
            assert_eq!(q(input).milli_value(), milli, "{input}");
        }
    }

    /// TestNewSet and TestMilliNewSet.
    #[test]
    fn constructors() {
        let integers = [
            (1, DEC, "1"),
            (1000, DEC, "1k"),
            (1234000, DEC, "1234k"),
            (1024, BIN, "1Ki"),
            (1024 * 1024, BIN, "1Mi"),
            (1000000, EXP, "1e6"),
        ];
        for (value, format, want) in integers {
            let got = Quantity::from_integer(value, format);
            assert_eq!(got.to_string(), want);
            assert_eq!(q(want).value_ceil(), i128::from(value));
        }
        let millis = [
            (1, DEC, "1m", true),
            (1000, DEC, "1", true),
            (1234000, DEC, "1234", true),
            (1024, BIN, "1024m", false),
            (1000000, EXP, "1e3", true),
            (1024 * 1024, BIN, "1048576m", false),
        ];
        for (value, format, want, exact) in millis {
            let got = Quantity::from_milli(value, format);
            assert_eq!(got.to_string(), want);
            if exact {
                assert_eq!(q(want).milli_value(), i128::from(value));
            }
        }
        assert_eq!(Quantity::default(), Quantity::zero());
        assert_eq!(Quantity::zero().format(), DEC);
    }

    /// Inputs upstream accepts in surprising ways; kept identical on purpose.
    #[test]
    fn upstream_quirks() {
        // The parser keeps the input as String() when it looks canonical enough.
        assert_eq!(q("+1").to_string(), "+1");
        assert_eq!(q("01").to_string(), "01");
        assert_eq!(q("+1Ki").to_string(), "+1Ki");
        assert_eq!(q("1.500k").to_string(), "1.500k");
        assert_eq!(q("1E3").to_string(), "1E3");
        // ...but arithmetic always re-canonicalises.
        assert_eq!(add(&q("+1"), &q("0")).to_string(), "1");
        assert_eq!(add(&q("1.500k"), &q("0")).to_string(), "1500");
        // No digits at all still parses as zero on the fast path.
        for input in ["-", "+", ".", "-.", "e3", "Ki", "m", "Ti"] {
            assert!(q(input).is_zero(), "{input}");
        }
        assert_eq!(q("Ki").format(), BIN);
        assert_eq!(q("e3").format(), EXP);
        // Exponents are narrowed to int32 like upstream's int32(parsed).
        assert_eq!(q("1e4294967296"), q("1"));
        assert_eq!(q("1e4294967296").to_string(), "1e4294967296");
        // Huge digit strings are exact.
        let long = format!("1{}e-100000", "0".repeat(100_000));
        assert_eq!(q(&long).to_string(), "1");
        let tiny = format!("0.{}1", "0".repeat(100_000));
        assert_eq!(q(&tiny).to_string(), "1n");
        let long_binary = format!("0.{}1Ei", "0".repeat(50_000));
        assert_eq!(q(&long_binary).to_string(), "1n");
        // Binary values past the cap saturate instead of failing.
        let huge_binary = format!("{}Ki", "9".repeat(1000));
        assert_eq!(q(&huge_binary).to_string(), "9223372036854775807");
        // Past Ei upstream prints no binary suffix at all.
        let zetta = q("1Ei").checked_mul_int(1024).unwrap();
        assert_eq!(zetta.to_string(), "1");
    }

    #[test]
    fn overflow_is_none() {
        let big = q("100000000000E"); // 1e29 units, 1e38 nanos
        assert!(big.checked_add(&big).is_none());
        assert!(big.checked_mul_int(2).is_none());
        assert!(big.checked_sub(&big).unwrap().is_zero());
        assert!(Quantity::zero().checked_sub(&big).unwrap().is_negative());
        assert!(big.checked_mul_int(-1).unwrap().checked_sub(&big).is_none());
    }

    #[test]
    fn k8s_conversions() {
        let from = |s: &str| Quantity::try_from(&K8sQuantity(s.to_owned()));
        assert_eq!(from(" 1Gi\n").unwrap().to_string(), "1Gi");
        assert_eq!(from("1 ").unwrap(), q("1"));
        assert_eq!(from("nope"), Err(QuantityError::FormatWrong));
        assert_eq!(from(""), Err(QuantityError::FormatWrong));
        let sum = add(&q("1Gi"), &q("512Mi"));
        assert_eq!(sum.to_k8s().0, "1536Mi");
        assert_eq!(K8sQuantity::from(&q("1.5")).0, "1500m");
    }

    /// A small deterministic generator, so the tests need no dependencies.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 11
        }
    }

    #[test]
    fn canonical_text_round_trips() {
        let mut rng = Lcg(42);
        for _ in 0..20_000 {
            let format = [DEC, BIN, EXP][(rng.next() % 3) as usize];
            let units = (rng.next() % 1_000_000) as i128;
            let scale = 10i128.pow((rng.next() % 19) as u32);
            let mut nanos = units * scale;
            if format == BIN {
                nanos = (units << (rng.next() % 50)) * NANOS_PER_UNIT;
                nanos = nanos.min(BINARY_CAP_NANOS);
            }
            if rng.next().is_multiple_of(2) {
                nanos = -nanos;
            }
            let value = Quantity::from_nanos(nanos, format);
            let text = value.to_string();
            let reparsed = q(&text);
            assert_eq!(reparsed, value, "{text}");
            // Text that comes back in the same format is already canonical. (A BinarySI
            // "1536" comes back DecimalSI and then prints "1536", but "5464000" -> "5464k".)
            if reparsed.format() == value.format() {
                assert_eq!(reparsed.to_string(), text);
                let mut canonical = reparsed.clone();
                canonical.cached = None;
                assert_eq!(canonical.to_string(), text, "{text} is not canonical");
            }
        }
    }

    #[test]
    fn random_input_never_panics() {
        let alphabet = b"0123456789.+-eEinumkKMGTP x";
        let mut rng = Lcg(7);
        for _ in 0..50_000 {
            let len = (rng.next() % 12) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
                .collect();
            let text = String::from_utf8(bytes).unwrap();
            if let Ok(value) = text.parse::<Quantity>() {
                let shown = value.to_string();
                assert_eq!(q(&shown), value, "{text:?} -> {shown:?}");
                let _ = (
                    value.value_ceil(),
                    value.milli_value(),
                    value.round_up_to_integer(),
                );
            }
        }
    }
}
