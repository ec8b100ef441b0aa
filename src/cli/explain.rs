//! `kcm explain <kind> [-n NAMESPACE] NAME`: its own command line, apart from
//! kube-controller-manager's flags (`kcm` alone parses those as before). Also what the binary
//! answers as the kubectl plugin `kubectl-kcm` (`kubectl kcm explain …`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Parser, ValueEnum};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::explain::{ExplainError, Kind, Reads, Request, explain, read};
use crate::features::{FeatureGateError, FeatureGates};

/// The subcommand, as the first argument.
pub const SUBCOMMAND: &str = "explain";
/// The name kubectl gives a plugin for `kubectl kcm`.
pub const KUBECTL_PLUGIN: &str = "kubectl-kcm";

/// How the answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

/// Why kcm's status of an object is what it is: the status kcm would write now beside the
/// stored one, and the reasons, from the controllers' own planning code. It reads the
/// cluster once (GET and LIST) and writes nothing.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(
    name = "kcm explain",
    after_help = "Kinds: resourcequota (quota), poddisruptionbudget (pdb), resourceclaim (claim), \
                  pod (its claims), node (its TTL), storageversion. KIND/NAME works too."
)]
pub struct ExplainOptions {
    /// The kind of object (or KIND/NAME)
    pub kind: String,
    /// The object's name
    pub name: Option<String>,
    /// The object's namespace (default: the context's, else "default")
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// List every object making up a quota's usage, not only the largest 10
    #[arg(long)]
    pub all: bool,
    /// Output format
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
    /// Path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster)
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use
    #[arg(long)]
    pub context: Option<String>,
    /// kcm's --feature-gates, as the controllers run with them (A=true,B=false)
    #[arg(long = "feature-gates", value_delimiter = ',')]
    pub feature_gates: Vec<String>,
}

/// Why `kcm explain` cannot answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainArgsError {
    #[error(
        "unknown kind {0:?}: expected one of resourcequota (quota), poddisruptionbudget (pdb), resourceclaim (claim), pod, node, storageversion"
    )]
    Kind(String),
    #[error("which {0}? give its name")]
    NoName(&'static str),
    #[error(transparent)]
    Gates(#[from] FeatureGateError),
    #[error(transparent)]
    Explain(#[from] ExplainError),
    #[error("cannot make a client: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot print JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot print YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

impl ExplainOptions {
    /// What to explain; `default_namespace` is the context's, for namespaced kinds.
    pub fn request(&self, default_namespace: &str) -> Result<Request, ExplainArgsError> {
        let (kind, name) = match (self.kind.split_once('/'), &self.name) {
            (Some((kind, name)), None) => (kind, Some(name.to_string())),
            (_, name) => (self.kind.as_str(), name.clone()),
        };
        let kind = Kind::parse(kind).ok_or_else(|| ExplainArgsError::Kind(kind.to_string()))?;
        let name = name
            .filter(|n| !n.is_empty())
            .ok_or(ExplainArgsError::NoName(kind.api_kind()))?;
        let namespace = match kind.namespaced() {
            true => self
                .namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_string()),
            false => String::new(),
        };
        Ok(Request {
            kind,
            namespace,
            name,
            all: self.all,
        })
    }

    /// The feature gates the controllers run with.
    pub fn gates(&self) -> Result<FeatureGates, ExplainArgsError> {
        Ok(FeatureGates::parse(&self.feature_gates)?.gates)
    }

    /// Reads the cluster once and prints the answer in the chosen format.
    pub async fn run(&self) -> Result<String, ExplainArgsError> {
        let gates = self.gates()?;
        // A wrong kind or a missing name is said before any connection is tried.
        self.request("")?;
        let config = read::config(self.kubeconfig.as_deref(), self.context.as_deref()).await?;
        let request = self.request(&config.default_namespace)?;
        let client = kube::Client::try_from(config).map_err(ExplainArgsError::Client)?;
        let informers = read::load(&client, &request, &gates).await?;
        let reads = Reads {
            informers: &informers,
            client: &client,
            gates: &gates,
            now: Time(Timestamp::now()),
        };
        let answer = explain(&reads, &request).await?;
        Ok(match self.output {
            Output::Text => answer.to_text(),
            Output::Json => serde_json::to_string_pretty(&answer)? + "\n",
            Output::Yaml => serde_yaml_ng::to_string(&answer)?,
        })
    }
}

/// The arguments of `kcm explain …` (or `kubectl-kcm explain …`) when the command line is
/// one: everything after `explain`, after the program's name for clap. `None`: kcm's own
/// command line.
pub fn explain_args(args: &[OsString]) -> Option<Vec<OsString>> {
    let first = args.get(1)?;
    (first == SUBCOMMAND).then(|| {
        let mut rest = vec![OsString::from("kcm explain")];
        rest.extend(args[2..].iter().cloned());
        rest
    })
}

/// Whether the program runs as the kubectl plugin (`kubectl kcm …`).
pub fn is_kubectl_plugin(program: &OsString) -> bool {
    Path::new(program)
        .file_name()
        .is_some_and(|name| name == KUBECTL_PLUGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    fn options(line: &[&str]) -> ExplainOptions {
        let rest = explain_args(&args(line)).expect("an explain command line");
        ExplainOptions::try_parse_from(rest).expect("valid")
    }

    #[test]
    fn explain_is_detected_only_as_the_first_argument() {
        assert!(explain_args(&args(&["kcm", "explain", "pdb", "web"])).is_some());
        assert!(explain_args(&args(&["kcm", "--controllers=*", "explain"])).is_none());
        assert!(explain_args(&args(&["kcm"])).is_none());
        assert!(is_kubectl_plugin(&"/usr/local/bin/kubectl-kcm".into()));
        assert!(!is_kubectl_plugin(&"/usr/local/bin/kcm".into()));
    }

    #[test]
    fn kinds_names_and_namespaces() {
        let pdb = options(&["kcm", "explain", "pdb", "-n", "shop", "web"]);
        let request = pdb.request("default").unwrap();
        assert_eq!(
            (
                request.kind,
                request.namespace.as_str(),
                request.name.as_str()
            ),
            (Kind::PodDisruptionBudget, "shop", "web")
        );
        let quota = options(&["kcm", "explain", "quota/compute", "--all", "-o", "yaml"]);
        let request = quota.request("team").unwrap();
        assert_eq!(
            (
                request.kind,
                request.namespace.as_str(),
                request.all,
                quota.output
            ),
            (Kind::ResourceQuota, "team", true, Output::Yaml)
        );
        let node = options(&["kcm", "explain", "node", "-n", "x", "n1"]);
        assert_eq!(node.request("default").unwrap().namespace, "");
        let unknown = options(&["kcm", "explain", "secret", "s"]).request("default");
        assert!(matches!(unknown, Err(ExplainArgsError::Kind(k)) if k == "secret"));
        let nameless = options(&["kcm", "explain", "claim"]).request("default");
        assert!(matches!(
            nameless,
            Err(ExplainArgsError::NoName("ResourceClaim"))
        ));
    }
}
