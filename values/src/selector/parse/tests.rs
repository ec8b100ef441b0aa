//! Ports of apimachinery's `labels` parser tests (selector_test.go), with upstream's texts.

use std::collections::BTreeMap;

use super::super::{Operator, Requirement, Selector};
use super::{Lexer, Parser, Token, parse};

/// An object without labels.
const NO_LABELS: Option<&BTreeMap<String, String>> = None;

// Selector, label set, expected match.
type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn label_match(sel: &str, set: &[(&str, &str)]) -> bool {
    let parsed = parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
    parsed.matches(Some(&labels(set)))
}

fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.to_owned(),
        operator,
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

/// The requirements a string parses to, or its error text.
fn requirements(s: &str) -> Result<Vec<Requirement>, String> {
    match parse(s) {
        Ok(Selector::Requirements(reqs)) => Ok(reqs),
        Ok(Selector::Nothing) => panic!("{s:?} parsed to Nothing"),
        Err(e) => Err(e.to_string()),
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
        assert!(parse(s).is_ok(), "{s:?}");
    }
    for s in ["x=a||y=b", "x==a==b", "!x=a", "x<a"] {
        assert!(parse(s).is_err(), "{s:?}");
    }
}

#[test]
fn label_parse_is_deterministic() {
    assert_eq!(parse("x=a,a=x"), parse("a=x,x=a"));
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

// TestRequirementSelectorMatching, expressed as selector strings, and the set-based
// treatment of missing keys.
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
    let everything = parse("").unwrap();
    assert!(everything.is_empty());
    assert!(everything.matches(NO_LABELS));
    let sel = parse("x notin (a),!y").unwrap();
    assert!(!sel.is_empty());
    assert!(sel.matches(NO_LABELS));
    assert!(!parse("x").unwrap().matches(NO_LABELS));
}

#[test]
fn label_set_selector_parser_outputs() {
    use Operator::*;
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
        let got = requirements(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(got, want, "{input:?}");
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
        assert_eq!(requirements(input), Err(want), "{input:?}");
    }
    let long = format!("x={}", "v".repeat(64));
    assert_eq!(
        requirements(&long),
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
    assert!(parse(&ok).is_ok());
    assert!(parse(&"a".repeat(254)).is_err());
    assert!(parse(&format!("{}/n", "a".repeat(254))).is_err());
    assert!(parse("1foo in (bar)").is_ok());
    assert!(parse("1234 in (bar)").is_ok());
    assert!(parse("Example.com/x").is_err());
    assert!(parse("a..b/x").is_err());
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
    assert_eq!(parse("a \0garbage(("), parse("a"));
    assert_eq!(
        requirements("a\0b"),
        Err(
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt".into()
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
        let _ = parse(s);
    }
    assert_eq!(
        requirements("in in (in)"),
        Ok(vec![req("in", Operator::In, &["in"])])
    );
}

// Every short string over the syntax-relevant alphabet parses or errors
// without panicking.
#[test]
fn parse_never_panics_exhaustive_short_inputs() {
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
            let _ = parse(s).map(|sel| sel.matches(NO_LABELS));
        }
        inputs = next;
    }
}
