//! Kubernetes values as apimachinery has them, and Go's renderings of values, so that what kcm
//! writes and what kube-testserver answers read byte for byte as upstream's: `Quantity`
//! (`resource.Quantity`), label selectors (`labels.Parse`, `LabelSelectorAsSelector`,
//! `Matches`, `String`), the label-key, label-value and DNS-1123 name rules with their messages,
//! and `%q`, `%v`, `strconv` as Go prints and parses them.
//!
//! Pure values: nothing here talks to an API server or knows what one does with them.

pub mod golang;
pub mod quantity;
pub mod selector;
pub mod validation;
