//! Label and field selectors with kube-apiserver semantics.
//!
//! The label parser is a port of apimachinery `labels.Parse` (lexer, parser and
//! `NewRequirement` validation), and the field parser of `fields.ParseSelector`,
//! so that clients see the same accept/reject decisions, the same error text and
//! the same matches as against a real server.

use serde_json::{Map, Value};

// ---------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
    // Sorted and deduplicated, as sets.String.List() gives them upstream.
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let found = labels.and_then(|m| m.get(&self.key));
        // Labels are strings on a valid object; any other JSON value counts as
        // present but equal to no selector value.
        let has_value = |v: &Value| {
            v.as_str()
                .is_some_and(|s| self.values.iter().any(|x| x == s))
        };
        match self.op {
            Op::In | Op::Equals | Op::DoubleEquals => found.is_some_and(has_value),
            // A missing key satisfies `!=` and `notin`, as upstream.
            Op::NotIn | Op::NotEquals => !found.is_some_and(has_value),
            Op::Exists => found.is_some(),
            Op::DoesNotExist => found.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let Some(have) = found
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<i64>().ok())
                else {
                    return false;
                };
                let Some(want) = self.values.first().and_then(|s| s.parse::<i64>().ok()) else {
                    return false;
                };
                if self.op == Op::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// A parsed `labelSelector` query string, apimachinery `labels.Parse` syntax:
/// `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a` (exists), `!a`
/// (does not exist), and also `a>1` / `a<1` (integer comparison), which the
/// real parser accepts too. Comma-separated requirements are ANDed.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelSelector {
    // Sorted by key, as upstream, so equal selectors compare equal.
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector; errors carry apimachinery's text, e.g.
    /// `unable to parse requirement: <nil>: Invalid value: "a b": ...`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether an object with these `metadata.labels` is selected; `None`
    /// (no labels at all) behaves as an empty label set.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A `metav1.LabelSelector` object as `LabelSelectorAsSelector` reads it, with its
    /// errors: an unknown operator, a key or value that is no label's, values where the
    /// operator takes none or none where it needs some. An empty one selects everything; a
    /// missing (null) selector, which selects nothing, is the caller's to handle.
    pub fn from_object(selector: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            let value = value.as_str().unwrap_or_default().to_string();
            requirements.push(checked_requirement(key, Op::Equals, vec![value])?);
        }
        for expr in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let op = match expr["operator"].as_str().unwrap_or_default() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            let values: Vec<String> = expr["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            let key = expr["key"].as_str().unwrap_or_default();
            requirements.push(checked_requirement(key, op, sorted_set(values))?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }
}

/// `NewRequirement` for a selector given as an object: the key and the number of values are
/// checked here, as the string parser's grammar checks them for its requirements.
fn checked_requirement(key: &str, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let errs = label_key_errors(key);
    if !errs.is_empty() {
        return Err(invalid("key", key, &errs.join("; ")));
    }
    let wrong_count = match op {
        Op::In | Op::NotIn if values.is_empty() => {
            Some("for 'in', 'notin' operators, values set can't be empty")
        }
        Op::Exists | Op::DoesNotExist if !values.is_empty() => {
            Some("values set must be empty for exists and does not exist")
        }
        Op::Equals if values.len() != 1 => {
            Some("exact-match compatibility requires one single value")
        }
        _ => None,
    };
    if let Some(why) = wrong_count {
        return Err(format!("values: {why}"));
    }
    new_requirement(key.to_string(), op, values)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn string_to_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(ch: u8) -> bool {
    matches!(ch, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Byte lexer mirroring upstream's, including its quirk that a NUL byte reads
/// like the end of input (Go's `read` returns 0 for both).
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
        }
        let tok = string_to_token(&buf).unwrap_or(Token::Identifier);
        (tok, String::from_utf8_lossy(&buf).into_owned())
    }

    /// Longest run of special symbols that is still a known operator.
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            buf.push(ch);
            if let Some(tok) = string_to_token(&buf) {
                last = Some((tok, buf.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some((tok, len)) => {
                buf.truncate(len);
                (tok, String::from_utf8_lossy(&buf).into_owned())
            }
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buf)
                ),
            ),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(ch) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    // In value position `in`/`notin` are plain identifiers (`a in (in)`).
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        // Past the end reads as end of string rather than panicking.
        let (tok, lit) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Op::Exists | Op::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    /// Key plus `Exists`/`DoesNotExist` when no binary operator follows.
    /// `!key` followed by an operator keeps `DoesNotExist`; the stray
    /// operator is then rejected by the caller, as upstream.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        // Upstream passes a nil field path here, which prints as "<nil>".
        let errs = label_key_errors(&lit);
        if !errs.is_empty() {
            return Err(invalid("<nil>", &lit, &errs.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Op::In,
            Token::Equals => Op::Equals,
            Token::DoubleEquals => Op::DoubleEquals,
            Token::GreaterThan => Op::GreaterThan,
            Token::LessThan => Op::LessThan,
            Token::NotIn => Op::NotIn,
            Token::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // parse_identifiers_list only returns before a ')'.
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                // `()` is the set holding only the empty string.
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// Comma-separated, possibly empty identifiers: `(a,,b)` and `(,a)` hold "".
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.push(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(sorted_set(set)),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.push(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.push(String::new());
                        return Ok(sorted_set(set));
                    }
                    if tok2 == Token::Comma {
                        set.push(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            // `a=` selects the empty value.
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

fn sorted_set(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// Value checks of upstream `NewRequirement`. The key was validated already and
/// the parser never produces a wrong value count, so only value content is
/// checked; errors are aggregated the way `ErrorList.ToAggregate` prints them.
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let mut errs: Vec<String> = Vec::new();
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(invalid(
                    &format!("values[{i}]"),
                    v,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let msgs = label_value_errors(v);
        if !msgs.is_empty() {
            errs.push(invalid(&format!("values[{i}][{key}]"), v, &msgs.join("; ")));
        }
    }
    let mut unique: Vec<String> = Vec::new();
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(unique.remove(0)),
        _ => Err(format!("[{}]", unique.join(", "))),
    }
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// Go's `%q` for strings, so error text quotes values byte-for-byte alike for
/// ASCII; printability of non-ASCII is approximated (see `go_printable`).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `strconv.IsPrint`: letters, marks, numbers, punctuation,
/// symbols and ASCII space; not other spaces, controls or format characters.
fn go_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let format_char = matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
        | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}');
    !c.is_control() && !c.is_whitespace() && !format_char
}

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `content.RegexError`, including its double space between examples.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{ex}', "));
    }
    out.push_str(&format!("regex used for validation is '{re}')"));
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, anchored.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Lowercase RFC 1123 subdomain syntax (length checked separately).
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => edge(f) && edge(l) && b.iter().all(|c| edge(c) || *c == b'-'),
            _ => false,
        }
    })
}

/// `content.IsLabelKey`: optional DNS-subdomain prefix, '/', name.
fn label_key_errors(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errs.push(format!("prefix part {}", max_len_error(253)));
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    LABEL_KEY_ERR,
                    LABEL_KEY_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `content.IsLabelValue`: empty, or a label name of at most 63 bytes.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
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

// ---------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed `fieldSelector`: `f=v`, `f==v`, `f!=v`, comma-separated, ANDed;
/// backslash escapes (`\,` `\=` `\\`) in values as apimachinery
/// `fields.ParseSelector`. No whitespace trimming, as upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        // Upstream sorts the raw terms, which decides which error is reported.
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_value(rhs)?;
            // Upstream's Transform drops a term whose field and value are both
            // empty (`=`, `!=`), so it selects everything instead of failing.
            if lhs.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: lhs.to_owned(),
                value,
                negated: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Field names used, so the caller can reject unsupported ones with
    /// `field label not supported: <name>`.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// `get(field)` returns the object's value for that field ("" when unset).
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.terms
            .iter()
            .all(|t| (get(&t.field) == t.value) != t.negated)
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits at the first operator; `!=` and `==` are tried before `=` so that
/// `a==b` does not leave `=b` as the value.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Upstream formats the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(out)
}

/// Value of a supported field of an object for field selectors, as the real
/// server's per-kind field label conversion and `ToSelectableFields` define
/// them. `None` means the field is not supported for that kind (answer 400
/// `field label not supported: <field>`); unset values read as "".
///
/// Every kind: `metadata.name`, and `metadata.namespace` except for Node and
/// Namespace, whose conversion funcs reject it (other cluster-scoped kinds
/// accept it and read ""). Pod: `spec.nodeName` (also the legacy alias
/// `spec.host`), `spec.restartPolicy`, `spec.schedulerName`,
/// `spec.serviceAccountName`, `spec.hostNetwork`, `status.phase`,
/// `status.podIP`, `status.podIPs` (accepted but never set upstream, so ""),
/// `status.nominatedNodeName`. Event (core/v1): `involvedObject.*`, `reason`,
/// `reportingComponent`, `source`, `type`; an Event whose apiVersion is
/// `events.k8s.io/*` uses that group's names (`regarding.*`,
/// `reportingController`, ...). Secret: `type`. Node: `spec.unschedulable`.
/// Namespace: `status.phase`. Service: `spec.clusterIP`, `spec.type`.
/// ReplicationController: `status.replicas`. Job: `status.successful`.
pub fn field_value(kind: &str, obj: &Value, field: &str) -> Option<String> {
    let text = |ptr: &str| str_at(obj, ptr);
    let flag = |ptr: &str| -> String {
        obj.pointer(ptr)
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()
    };
    let number = |ptr: &str| -> String {
        obj.pointer(ptr)
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .to_string()
    };
    match field {
        "metadata.name" => return Some(text("/metadata/name")),
        "metadata.namespace" if kind != "Node" && kind != "Namespace" => {
            return Some(text("/metadata/namespace"));
        }
        _ => {}
    }
    match kind {
        "Pod" => match field {
            "spec.nodeName" | "spec.host" => Some(text("/spec/nodeName")),
            "spec.restartPolicy" => Some(text("/spec/restartPolicy")),
            "spec.schedulerName" => Some(text("/spec/schedulerName")),
            "spec.serviceAccountName" => Some(text("/spec/serviceAccountName")),
            "spec.hostNetwork" => Some(flag("/spec/hostNetwork")),
            "status.phase" => Some(text("/status/phase")),
            // v1->internal conversion makes status.podIP authoritative and
            // falls back to podIPs[0]; the field set uses the result.
            "status.podIP" => {
                let ip = text("/status/podIP");
                Some(if ip.is_empty() {
                    text("/status/podIPs/0/ip")
                } else {
                    ip
                })
            }
            "status.podIPs" => Some(String::new()),
            "status.nominatedNodeName" => Some(text("/status/nominatedNodeName")),
            _ => None,
        },
        "Event" => {
            let events_group = obj
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("events.k8s.io/"));
            if events_group {
                events_k8s_io_field(obj, field)
            } else {
                core_event_field(obj, field)
            }
        }
        "Secret" => (field == "type").then(|| text("/type")),
        "Node" => (field == "spec.unschedulable").then(|| flag("/spec/unschedulable")),
        "Namespace" => (field == "status.phase").then(|| text("/status/phase")),
        "Service" => match field {
            "spec.clusterIP" => Some(text("/spec/clusterIP")),
            "spec.type" => Some(text("/spec/type")),
            _ => None,
        },
        "ReplicationController" => (field == "status.replicas").then(|| number("/status/replicas")),
        "Job" => (field == "status.successful").then(|| number("/status/succeeded")),
        _ => None,
    }
}

fn str_at(obj: &Value, ptr: &str) -> String {
    obj.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn core_event_field(obj: &Value, field: &str) -> Option<String> {
    if let Some(sub) = field.strip_prefix("involvedObject.") {
        return event_reference_field(obj, "/involvedObject/", sub);
    }
    match field {
        "reason" => Some(str_at(obj, "/reason")),
        "type" => Some(str_at(obj, "/type")),
        // core/v1 serialises ReportingController as reportingComponent.
        "reportingComponent" => Some(str_at(obj, "/reportingComponent")),
        "source" => {
            let source = str_at(obj, "/source/component");
            Some(if source.is_empty() {
                str_at(obj, "/reportingComponent")
            } else {
                source
            })
        }
        _ => None,
    }
}

fn events_k8s_io_field(obj: &Value, field: &str) -> Option<String> {
    if let Some(sub) = field.strip_prefix("regarding.") {
        return event_reference_field(obj, "/regarding/", sub);
    }
    match field {
        "reason" => Some(str_at(obj, "/reason")),
        "type" => Some(str_at(obj, "/type")),
        "reportingController" => Some(str_at(obj, "/reportingController")),
        "source" => {
            let source = str_at(obj, "/deprecatedSource/component");
            Some(if source.is_empty() {
                str_at(obj, "/reportingController")
            } else {
                source
            })
        }
        _ => None,
    }
}

fn event_reference_field(obj: &Value, base: &str, sub: &str) -> Option<String> {
    matches!(
        sub,
        "kind" | "namespace" | "name" | "uid" | "apiVersion" | "resourceVersion" | "fieldPath"
    )
    .then(|| str_at(obj, &format!("{base}{sub}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Selector, label set, expected match.
    type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

    fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect()
    }

    fn label_match(sel: &str, set: &[(&str, &str)]) -> bool {
        let parsed = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
        parsed.matches(Some(&labels(set)))
    }

    fn req(key: &str, op: Op, values: &[&str]) -> Requirement {
        Requirement {
            key: key.to_owned(),
            op,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn tokens(s: &str) -> Vec<(Token, String)> {
        Parser::new(s).items
    }

    // TestSelectorParse (good and bad strings).
    #[test]
    fn label_parse_good_and_bad() {
        for s in [
            "x=a,y=b,z=c",
            "",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
        ] {
            assert!(LabelSelector::parse(s).is_ok(), "{s:?}");
        }
        for s in ["x=a||y=b", "x==a==b", "!x=a", "x<a"] {
            assert!(LabelSelector::parse(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn label_parse_is_deterministic() {
        assert_eq!(
            LabelSelector::parse("x=a,a=x"),
            LabelSelector::parse("a=x,x=a")
        );
    }

    // TestSelectorMatches.
    #[test]
    fn label_selector_matches() {
        let cases: &[MatchCase] = &[
            ("", &[("x", "y")], true),
            ("x=y", &[("x", "y")], true),
            ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
            ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
            ("notin=in", &[("notin", "in")], true),
            ("x", &[("x", "z")], true),
            ("!x", &[("y", "z")], true),
            ("x>1", &[("x", "2")], true),
            ("x<1", &[("x", "0")], true),
            ("x=z", &[], false),
            ("x=y", &[("x", "z")], false),
            ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
            ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
            ("x", &[("y", "z")], false),
            ("!x", &[("x", "z")], false),
            ("x>1", &[("x", "0")], false),
            ("x<1", &[("x", "2")], false),
            ("foo=bar", &[("foo", "bar"), ("baz", "blah")], true),
            ("baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
            ("foo=bar,baz=blah", &[("foo", "bar"), ("baz", "blah")], true),
            ("foo=blah", &[("foo", "bar"), ("baz", "blah")], false),
            ("baz=bar", &[("foo", "bar"), ("baz", "blah")], false),
            (
                "foo=bar,foobar=bar,baz=blah",
                &[("foo", "bar"), ("baz", "blah")],
                false,
            ),
        ];
        for (sel, set, want) in cases {
            assert_eq!(label_match(sel, set), *want, "{sel:?} on {set:?}");
        }
    }

    // TestRequirementSelectorMatching, expressed as selector strings; plus the
    #[test]
    fn selector_objects_read_as_label_selector_as_selector() {
        let object = |v: serde_json::Value| LabelSelector::from_object(&v);
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let selects = |v: serde_json::Value| object(v).unwrap().matches(Some(&web));
        assert!(selects(serde_json::json!({})));
        assert!(selects(serde_json::json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [
                { "key": "tier", "operator": "In", "values": ["front", "back"] },
                { "key": "zone", "operator": "DoesNotExist" },
            ],
        })));
        assert!(!selects(
            serde_json::json!({ "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["front"] }] })
        ));
        assert_eq!(
            object(
                serde_json::json!({ "matchExpressions": [{ "key": "a", "operator": "Gt", "values": ["1"] }] })
            ),
            Err("\"Gt\" is not a valid label selector operator".to_string())
        );
        assert!(
            object(serde_json::json!({ "matchExpressions": [{ "key": "a", "operator": "In", "values": [] }] }))
                .is_err()
        );
        assert!(
            object(serde_json::json!({ "matchExpressions": [{ "key": "a", "operator": "Exists", "values": ["x"] }] }))
                .is_err()
        );
        assert!(object(serde_json::json!({ "matchLabels": { "a b": "x" } })).is_err());
    }

    // set-based treatment of missing keys.
    #[test]
    fn label_set_based_matching() {
        let cases: &[MatchCase] = &[
            (
                "x in (foo),y notin (alpha)",
                &[("x", "foo"), ("y", "baz")],
                true,
            ),
            (
                "x in (foo),y in (alpha)",
                &[("x", "foo"), ("y", "baz")],
                false,
            ),
            ("x notin (),y", &[("y", "")], true),
            ("!x,y", &[("y", "")], true),
            ("x notin (),!y", &[("y", "")], false),
            ("x in ()", &[("y", "baz")], false),
            ("z>1", &[("z", "2")], true),
            ("z>1", &[("z", "v2")], false),
            ("x notin (a)", &[], true),
            ("x!=a", &[], true),
            ("x in (a,b)", &[("x", "b")], true),
            ("x in (a,b)", &[], false),
            ("x=", &[("x", "")], true),
            ("x=", &[], false),
            ("x<9223372036854775807", &[("x", "-5")], true),
        ];
        for (sel, set, want) in cases {
            assert_eq!(label_match(sel, set), *want, "{sel:?} on {set:?}");
        }
        let everything = LabelSelector::parse("").unwrap();
        assert!(everything.is_empty());
        assert!(everything.matches(None));
        let sel = LabelSelector::parse("x notin (a),!y").unwrap();
        assert!(!sel.is_empty());
        assert!(sel.matches(None));
        assert!(!LabelSelector::parse("x").unwrap().matches(None));
    }

    #[test]
    fn label_non_string_values_never_equal() {
        let mut m = Map::new();
        m.insert("x".into(), json!(1));
        let sel = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&m));
        assert!(sel("x"));
        assert!(!sel("x=1"));
        assert!(sel("x!=1"));
        assert!(!sel("x>0"));
    }

    // TestSetSelectorParser: exact parse output for valid input.
    #[test]
    fn label_set_selector_parser_outputs() {
        use Op::*;
        let cases: Vec<(&str, Vec<Requirement>)> = vec![
            ("", vec![]),
            ("\rx", vec![req("x", Exists, &[])]),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                vec![req("this-is-a-dns.domain.com/key-with-dash", Exists, &[])],
            ),
            (
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
                vec![req(
                    "this-is-another-dns.domain.com/key-with-dash",
                    In,
                    &["so", "what"],
                )],
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                vec![req(
                    "0.1.2.domain/99",
                    NotIn,
                    &["10.10.100.1", "tick.tack.clock"],
                )],
            ),
            ("foo  in\t (abc)", vec![req("foo", In, &["abc"])]),
            ("x notin\n (abc)", vec![req("x", NotIn, &["abc"])]),
            (
                "x  notin\t\t\t(abc,def)",
                vec![req("x", NotIn, &["abc", "def"])],
            ),
            ("x in (abc,def)", vec![req("x", In, &["abc", "def"])]),
            ("x in (abc,)", vec![req("x", In, &["", "abc"])]),
            ("x in ()", vec![req("x", In, &[""])]),
            (
                "x notin (abc,,def),bar,z in (),w",
                vec![
                    req("bar", Exists, &[]),
                    req("w", Exists, &[]),
                    req("x", NotIn, &["", "abc", "def"]),
                    req("z", In, &[""]),
                ],
            ),
            (
                "x,y in (a)",
                vec![req("x", Exists, &[]), req("y", In, &["a"])],
            ),
            ("x=a", vec![req("x", Equals, &["a"])]),
            ("x==a", vec![req("x", DoubleEquals, &["a"])]),
            ("x>1", vec![req("x", GreaterThan, &["1"])]),
            ("x<7", vec![req("x", LessThan, &["7"])]),
            (
                "x=a,y!=b",
                vec![req("x", Equals, &["a"]), req("y", NotEquals, &["b"])],
            ),
            (
                "x=a,y!=b,z in (h,i,j)",
                vec![
                    req("x", Equals, &["a"]),
                    req("y", NotEquals, &["b"]),
                    req("z", In, &["h", "i", "j"]),
                ],
            ),
            ("x notin ( )", vec![req("x", NotIn, &[""])]),
            ("x notin (, a)", vec![req("x", NotIn, &["", "a"])]),
            ("a ", vec![req("a", Exists, &[])]),
            (
                "a in (x,y,notin, z,in)",
                vec![req("a", In, &["in", "notin", "x", "y", "z"])],
            ),
            ("x,y", vec![req("x", Exists, &[]), req("y", Exists, &[])]),
            ("in=notin", vec![req("in", Equals, &["notin"])]),
            (
                "x=,z= ",
                vec![req("x", Equals, &[""]), req("z", Equals, &[""])],
            ),
            ("x in (b,a,b)", vec![req("x", In, &["a", "b"])]),
        ];
        for (input, want) in cases {
            let got = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(got.requirements, want, "{input:?}");
        }
    }

    // TestSetSelectorParser invalid inputs and TestSelectorParse bad strings,
    // with the exact upstream error text.
    #[test]
    fn label_parse_errors() {
        let value_err = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let long_key = "k".repeat(64);
        let name_err = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let cases: Vec<(&str, String)> = vec![
            (
                "x=a||y=b",
                format!("unable to parse requirement: values[0][x]: Invalid value: \"a||y\": {value_err}"),
            ),
            ("x==a==b", "found '==', expected: ',' or 'end of string'".into()),
            ("!x=a", "found '=', expected: ',' or 'end of string'".into()),
            (
                "x<a",
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
            ),
            ("x,,y", "found ',', expected: identifier after ','".into()),
            (",x,y", "found ',', expected: !, identifier, or 'end of string'".into()),
            (
                "x nott in (y)",
                "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt".into(),
            ),
            ("a in (xyz),", "found '', expected: identifier after ','".into()),
            ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'".into()),
            (
                "a in (xyz abc)",
                "unable to parse requirement: found 'abc', expected: ',' or ')'".into(),
            ),
            (
                "a notin(",
                "unable to parse requirement: found '', expected: ',', ')' or identifier".into(),
            ),
            (
                "a (",
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt".into(),
            ),
            ("(", "found '(', expected: !, identifier, or 'end of string'".into()),
            (
                "x in y",
                "unable to parse requirement: found 'y' expected: '('".into(),
            ),
            ("x in (a=)", "unable to parse requirement: found '=', expected: ',' or ')'".into()),
            ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier".into()),
            ("x===y", "unable to parse requirement: found '=', expected: identifier".into()),
            ("!", "unable to parse requirement: found '', expected: identifier".into()),
            (
                "app:monolith",
                format!("unable to parse requirement: <nil>: Invalid value: \"app:monolith\": {name_err}"),
            ),
            (
                "app.kubernetes_io/name=x",
                "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
            ),
            (
                "a/b/c",
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into(),
            ),
            (
                "/x",
                "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty".into(),
            ),
            (
                "p/",
                format!("unable to parse requirement: <nil>: Invalid value: \"p/\": name part must be non-empty; {name_err}"),
            ),
            (
                &long_key,
                format!(
                    "unable to parse requirement: <nil>: Invalid value: \"{long_key}\": name part must be no more than 63 bytes"
                ),
            ),
            (
                "x in (-a,b_)",
                format!(
                    "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": {value_err}, values[1][x]: Invalid value: \"b_\": {value_err}]"
                ),
            ),
            (
                "x>-1",
                format!("unable to parse requirement: values[0][x]: Invalid value: \"-1\": {value_err}"),
            ),
            (
                "x<b_",
                format!(
                    "unable to parse requirement: [values[0]: Invalid value: \"b_\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][x]: Invalid value: \"b_\": {value_err}]"
                ),
            ),
            (
                "x>99999999999999999999",
                "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
            ),
            (
                "x=a\"b\u{e9}\u{1}",
                format!("unable to parse requirement: values[0][x]: Invalid value: \"a\\\"b\u{e9}\\x01\": {value_err}"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(LabelSelector::parse(input), Err(want), "{input:?}");
        }
        let long = format!("x={}", "v".repeat(64));
        assert_eq!(
            LabelSelector::parse(&long),
            Err(format!(
                "unable to parse requirement: values[0][x]: Invalid value: \"{}\": must be no more than 63 bytes",
                "v".repeat(64)
            ))
        );
    }

    // Label keys: prefix up to 253, name up to 63 (TestRequirementConstructor).
    #[test]
    fn label_key_lengths() {
        let ok = format!("{}/{}", "a".repeat(253), "n".repeat(63));
        assert!(LabelSelector::parse(&ok).is_ok());
        assert!(LabelSelector::parse(&"a".repeat(254)).is_err());
        assert!(LabelSelector::parse(&format!("{}/n", "a".repeat(254))).is_err());
        assert!(LabelSelector::parse("1foo in (bar)").is_ok());
        assert!(LabelSelector::parse("1234 in (bar)").is_ok());
        assert!(LabelSelector::parse("Example.com/x").is_err());
        assert!(LabelSelector::parse("a..b/x").is_err());
    }

    // TestLexer / TestLexerSequence / TestParserLookahead.
    #[test]
    fn label_lexer() {
        use Token::*;
        let single = [
            ("", EndOfString, ""),
            (",", Comma, ","),
            ("notin", NotIn, "notin"),
            ("in", In, "in"),
            ("=", Equals, "="),
            ("==", DoubleEquals, "=="),
            (">", GreaterThan, ">"),
            ("<", LessThan, "<"),
            ("!", DoesNotExist, "!"),
            ("!=", NotEquals, "!="),
            ("(", OpenPar, "("),
            (")", ClosedPar, ")"),
            ("~", Identifier, "~"),
            ("||", Identifier, "||"),
        ];
        for (s, tok, lit) in single {
            let mut lexer = Lexer {
                s: s.as_bytes(),
                pos: 0,
            };
            assert_eq!(lexer.lex(), (tok, lit.to_owned()), "{s:?}");
        }
        let sequences: &[(&str, &[Token])] = &[
            (
                "key in ( value )",
                &[Identifier, In, OpenPar, Identifier, ClosedPar],
            ),
            (
                "key notin ( value )",
                &[Identifier, NotIn, OpenPar, Identifier, ClosedPar],
            ),
            (
                "key in ( value1, value2 )",
                &[
                    Identifier, In, OpenPar, Identifier, Comma, Identifier, ClosedPar,
                ],
            ),
            ("key", &[Identifier]),
            ("!key", &[DoesNotExist, Identifier]),
            ("()", &[OpenPar, ClosedPar]),
            (
                "x in (),y",
                &[Identifier, In, OpenPar, ClosedPar, Comma, Identifier],
            ),
            (
                "== != (), = notin",
                &[
                    DoubleEquals,
                    NotEquals,
                    OpenPar,
                    ClosedPar,
                    Comma,
                    Equals,
                    NotIn,
                ],
            ),
            ("key>2", &[Identifier, GreaterThan, Identifier]),
            ("key<1", &[Identifier, LessThan, Identifier]),
            ("a===b", &[Identifier, DoubleEquals, Equals, Identifier]),
            ("a!==b", &[Identifier, NotEquals, Equals, Identifier]),
        ];
        for (s, want) in sequences {
            let mut got: Vec<Token> = tokens(s).into_iter().map(|(t, _)| t).collect();
            assert_eq!(got.pop(), Some(EndOfString), "{s:?}");
            assert_eq!(&got, want, "{s:?}");
        }
    }

    // Go's lexer reads a NUL byte as end of input.
    #[test]
    fn label_nul_byte_ends_input_like_upstream() {
        assert_eq!(
            LabelSelector::parse("a \0garbage(("),
            LabelSelector::parse("a")
        );
        assert_eq!(
            LabelSelector::parse("a\0b"),
            Err(
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
                    .into()
            )
        );
    }

    #[test]
    fn label_parse_never_panics_on_odd_input() {
        for s in [
            "!",
            "!!",
            "!!x",
            "(",
            ")",
            "((",
            "=",
            "x=(",
            "x in (",
            "x in ((",
            "x in (a",
            "x in (a,",
            ",",
            ", ,",
            "é",
            "x=é",
            "\u{0}",
            "x in (\u{0}",
            "<>",
            "x<>1",
            "x notin",
            "x in",
            "in",
            "notin",
            "in in (in)",
            "!in",
        ] {
            let _ = LabelSelector::parse(s);
        }
        assert_eq!(
            LabelSelector::parse("in in (in)").map(|s| s.requirements),
            Ok(vec![req("in", Op::In, &["in"])])
        );
    }

    // Every short string over the syntax-relevant alphabet parses or errors
    // without panicking, in both parsers.
    #[test]
    fn parsers_never_panic_exhaustive_short_inputs() {
        let alphabet = [
            ' ', '=', '!', '(', ')', ',', '<', '>', 'a', 'i', 'n', '\\', '\0', 'é',
        ];
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for s in &inputs {
                for c in alphabet {
                    let mut t = s.clone();
                    t.push(c);
                    next.push(t);
                }
            }
            for s in &next {
                let _ = LabelSelector::parse(s).map(|sel| sel.matches(None));
                let _ = FieldSelector::parse(s).map(|sel| sel.matches(|_| String::new()));
            }
            inputs = next;
        }
    }

    // fields TestSelectorParse, TestDeterministicParse.
    #[test]
    fn field_parse_good_and_bad() {
        for s in ["x=a,y=b,z=c", "", "x!=a,y=b", "x=a||y\\=b", "x=a\\=\\=b"] {
            assert!(FieldSelector::parse(s).is_ok(), "{s:?}");
        }
        let bad: &[(&str, &str)] = &[
            (
                "x=a||y=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x==a==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
            (
                "x in (a)",
                "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
            ),
            (
                "x in (a,b,c)",
                "invalid selector: 'x in (a,b,c)'; can't understand 'b'",
            ),
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            (
                "k=\\a",
                "invalid field selector: invalid escape sequence: \\a",
            ),
            (
                "k=\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            (
                "k=\\\\\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (s, want) in bad {
            assert_eq!(FieldSelector::parse(s), Err((*want).to_owned()), "{s:?}");
        }
        assert_eq!(
            FieldSelector::parse("x=a,a=x"),
            FieldSelector::parse("a=x,x=a")
        );
    }

    fn field_terms(s: &str) -> Vec<(String, String, bool)> {
        FieldSelector::parse(s)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .terms
            .into_iter()
            .map(|t| (t.field, t.value, t.negated))
            .collect()
    }

    fn term(f: &str, v: &str, negated: bool) -> (String, String, bool) {
        (f.to_owned(), v.to_owned(), negated)
    }

    // TestSplitTerms / TestSplitTerm / TestEscapeValue, observed through parse.
    #[test]
    fn field_terms_and_escapes() {
        assert_eq!(split_terms(""), Vec::<&str>::new());
        assert_eq!(split_terms("a=a,"), vec!["a=a", ""]);
        assert_eq!(split_terms(",a=a"), vec!["", "a=a"]);
        assert_eq!(split_terms("k=\\,,k2=v2"), vec!["k=\\,", "k2=v2"]);
        assert_eq!(split_terms("k=\\\\,k2=v2"), vec!["k=\\\\", "k2=v2"]);
        assert_eq!(split_terms("k=\\\\\\,,k2=v2"), vec!["k=\\\\\\,", "k2=v2"]);
        assert_eq!(split_terms("k=\\a\\b\\"), vec!["k=\\a\\b\\"]);
        assert_eq!(split_terms("함=수,목=록"), vec!["함=수", "목=록"]);
        assert_eq!(split_term("a=value"), Some(("a", "=", "value")));
        assert_eq!(split_term("b==value"), Some(("b", "==", "value")));
        assert_eq!(split_term("c!=value"), Some(("c", "!=", "value")));
        assert_eq!(split_term("a"), None);
        assert_eq!(
            split_term("k=\\\\\\a\\b\\=\\,\\"),
            Some(("k", "=", "\\\\\\a\\b\\=\\,\\"))
        );
        assert_eq!(split_term("함=수"), Some(("함", "=", "수")));
        for (escaped, plain) in [
            ("", ""),
            ("a", "a"),
            ("\\=", "="),
            ("\\,", ","),
            ("\\\\", "\\"),
            ("\\\\\\=\\\\\\,\\\\", "\\=\\,\\"),
        ] {
            assert_eq!(unescape_value(escaped), Ok(plain.to_owned()), "{escaped:?}");
        }
        assert_eq!(
            field_terms("k=\\,,k2=v2"),
            // Sorted raw terms: '2' sorts before '='.
            vec![term("k2", "v2", false), term("k", ",", false)]
        );
        assert_eq!(
            field_terms("a!=b,c==d"),
            vec![term("a", "b", true), term("c", "d", false)]
        );
        // Whitespace is data in field selectors.
        assert_eq!(field_terms(" a = b "), vec![term(" a ", " b ", false)]);
        assert_eq!(field_terms("a="), vec![term("a", "", false)]);
        assert_eq!(field_terms("=x"), vec![term("", "x", false)]);
        // Empty field and value: dropped, as upstream's Transform does.
        assert!(FieldSelector::parse("=").unwrap().is_empty());
        assert!(FieldSelector::parse("!=,,").unwrap().is_empty());
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    // fields TestSelectorMatches.
    #[test]
    fn field_selector_matches() {
        let set = |pairs: &'static [(&'static str, &'static str)]| {
            move |f: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == f)
                    .map(|(_, v)| (*v).to_owned())
                    .unwrap_or_default()
            }
        };
        let m = |s: &str, pairs: &'static [(&'static str, &'static str)]| {
            FieldSelector::parse(s).unwrap().matches(set(pairs))
        };
        assert!(m("", &[("x", "y")]));
        assert!(m("x=y", &[("x", "y")]));
        assert!(m("x=y,z=w", &[("x", "y"), ("z", "w")]));
        assert!(m("x!=y,z!=w", &[("x", "z"), ("z", "a")]));
        assert!(m("notin=in", &[("notin", "in")]));
        assert!(!m("x=y", &[("x", "z")]));
        assert!(!m("x=y,z=w", &[("x", "w"), ("z", "w")]));
        assert!(!m("x!=y,z!=w", &[("x", "z"), ("z", "w")]));
        const FS: &[(&str, &str)] = &[("foo", "bar"), ("baz", "blah"), ("complex", "=value\\,\\")];
        assert!(m("foo=bar", FS));
        assert!(m("baz=blah", FS));
        assert!(m("foo=bar,baz=blah", FS));
        assert!(m("foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\", FS));
        assert!(!m("foo=blah", FS));
        assert!(!m("baz=bar", FS));
        assert!(!m("foo=bar,foobar=bar,baz=blah", FS));
        // Unset reads as "".
        assert!(m("spec.nodeName=", &[]));
        assert!(!m("spec.nodeName!=", &[]));
        let sel = FieldSelector::parse("b=1,a!=2,b=3").unwrap();
        assert_eq!(sel.fields().collect::<Vec<_>>(), vec!["a", "b", "b"]);
    }

    #[test]
    fn field_value_for_pods() {
        let unscheduled = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "restartPolicy": "Always"},
            "status": {"phase": "Pending"}
        });
        let fv = |f: &str| field_value("Pod", &unscheduled, f);
        assert_eq!(fv("metadata.name").as_deref(), Some("p"));
        assert_eq!(fv("metadata.namespace").as_deref(), Some("ns"));
        assert_eq!(fv("spec.nodeName").as_deref(), Some(""));
        assert_eq!(fv("spec.host").as_deref(), Some(""));
        assert_eq!(fv("spec.restartPolicy").as_deref(), Some("Always"));
        assert_eq!(fv("spec.schedulerName").as_deref(), Some(""));
        assert_eq!(fv("spec.serviceAccountName").as_deref(), Some(""));
        assert_eq!(fv("spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(fv("status.phase").as_deref(), Some("Pending"));
        assert_eq!(fv("status.podIP").as_deref(), Some(""));
        assert_eq!(fv("status.podIPs").as_deref(), Some(""));
        assert_eq!(fv("status.nominatedNodeName").as_deref(), Some(""));
        assert_eq!(fv("spec.containers"), None);
        assert_eq!(fv("metadata.uid"), None);

        let running = json!({
            "kind": "Pod",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"nodeName": "node-1", "hostNetwork": true, "schedulerName": "default-scheduler",
                     "serviceAccountName": "sa"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}],
                       "nominatedNodeName": "node-2"}
        });
        let fv = |f: &str| field_value("Pod", &running, f);
        assert_eq!(fv("spec.nodeName").as_deref(), Some("node-1"));
        assert_eq!(fv("spec.hostNetwork").as_deref(), Some("true"));
        assert_eq!(
            fv("spec.schedulerName").as_deref(),
            Some("default-scheduler")
        );
        assert_eq!(fv("spec.serviceAccountName").as_deref(), Some("sa"));
        assert_eq!(fv("status.phase").as_deref(), Some("Running"));
        assert_eq!(fv("status.podIP").as_deref(), Some("10.0.0.2"));
        assert_eq!(fv("status.nominatedNodeName").as_deref(), Some("node-2"));
        let with_pod_ip = json!({"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.2"}]}});
        assert_eq!(
            field_value("Pod", &with_pod_ip, "status.podIP").as_deref(),
            Some("10.0.0.9")
        );

        // End to end: unscheduled pods via spec.nodeName=.
        let sel = FieldSelector::parse("spec.nodeName=,status.phase!=Running").unwrap();
        assert!(sel.matches(|f: &str| field_value("Pod", &unscheduled, f).unwrap_or_default()));
        assert!(!sel.matches(|f: &str| field_value("Pod", &running, f).unwrap_or_default()));
        assert!(
            sel.fields()
                .all(|f| field_value("Pod", &running, f).is_some())
        );
    }

    #[test]
    fn field_value_for_other_kinds() {
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1",
                               "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Started", "type": "Normal", "reportingComponent": "kubelet"
        });
        let fv = |f: &str| field_value("Event", &event, f);
        assert_eq!(fv("involvedObject.kind").as_deref(), Some("Pod"));
        assert_eq!(fv("involvedObject.namespace").as_deref(), Some("ns"));
        assert_eq!(fv("involvedObject.name").as_deref(), Some("p"));
        assert_eq!(fv("involvedObject.uid").as_deref(), Some("u1"));
        assert_eq!(fv("involvedObject.apiVersion").as_deref(), Some("v1"));
        assert_eq!(fv("involvedObject.resourceVersion").as_deref(), Some("7"));
        assert_eq!(
            fv("involvedObject.fieldPath").as_deref(),
            Some("spec.containers{c}")
        );
        assert_eq!(fv("reason").as_deref(), Some("Started"));
        assert_eq!(fv("type").as_deref(), Some("Normal"));
        assert_eq!(fv("reportingComponent").as_deref(), Some("kubelet"));
        // source falls back to the reporting controller.
        assert_eq!(fv("source").as_deref(), Some("kubelet"));
        assert_eq!(fv("involvedObject.other"), None);
        assert_eq!(fv("regarding.kind"), None);
        let with_source = json!({"source": {"component": "scheduler"}, "reportingComponent": "x"});
        assert_eq!(
            field_value("Event", &with_source, "source").as_deref(),
            Some("scheduler")
        );

        let new_event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reportingController": "ctrl", "reason": "R", "type": "Warning"
        });
        let fv = |f: &str| field_value("Event", &new_event, f);
        assert_eq!(fv("regarding.kind").as_deref(), Some("Node"));
        assert_eq!(fv("regarding.name").as_deref(), Some("n1"));
        assert_eq!(fv("regarding.namespace").as_deref(), Some(""));
        assert_eq!(fv("reportingController").as_deref(), Some("ctrl"));
        assert_eq!(fv("source").as_deref(), Some("ctrl"));
        assert_eq!(fv("reason").as_deref(), Some("R"));
        assert_eq!(fv("type").as_deref(), Some("Warning"));
        assert_eq!(fv("involvedObject.kind"), None);
        assert_eq!(fv("reportingComponent"), None);

        let secret = json!({"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque"});
        assert_eq!(
            field_value("Secret", &secret, "type").as_deref(),
            Some("Opaque")
        );
        assert_eq!(
            field_value("Secret", &json!({}), "type").as_deref(),
            Some("")
        );
        assert_eq!(field_value("Secret", &secret, "data"), None);

        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            field_value("Node", &node, "spec.unschedulable").as_deref(),
            Some("true")
        );
        assert_eq!(
            field_value("Node", &json!({}), "spec.unschedulable").as_deref(),
            Some("false")
        );
        assert_eq!(
            field_value("Node", &node, "metadata.name").as_deref(),
            Some("n")
        );
        assert_eq!(field_value("Node", &node, "metadata.namespace"), None);

        let ns = json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}});
        assert_eq!(
            field_value("Namespace", &ns, "status.phase").as_deref(),
            Some("Active")
        );
        assert_eq!(field_value("Namespace", &ns, "metadata.namespace"), None);

        let svc = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1"}});
        assert_eq!(
            field_value("Service", &svc, "spec.type").as_deref(),
            Some("ClusterIP")
        );
        assert_eq!(
            field_value("Service", &svc, "spec.clusterIP").as_deref(),
            Some("10.96.0.1")
        );
        assert_eq!(
            field_value("ReplicationController", &json!({}), "status.replicas").as_deref(),
            Some("0")
        );
        assert_eq!(
            field_value(
                "Job",
                &json!({"status": {"succeeded": 3}}),
                "status.successful"
            )
            .as_deref(),
            Some("3")
        );

        // Generic kinds: name and namespace only; cluster-scoped reads "".
        let cm = json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}});
        assert_eq!(
            field_value("ConfigMap", &cm, "metadata.namespace").as_deref(),
            Some("ns")
        );
        assert_eq!(field_value("ConfigMap", &cm, "data.k"), None);
        assert_eq!(field_value("Pod", &cm, "spec.unschedulable"), None);
        assert_eq!(
            field_value(
                "ClusterRole",
                &json!({"metadata": {"name": "r"}}),
                "metadata.namespace"
            )
            .as_deref(),
            Some("")
        );
        assert_eq!(
            field_value("Widget", &json!(null), "metadata.name").as_deref(),
            Some("")
        );
    }
}
