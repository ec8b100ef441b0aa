//! Upstream's Logs and Metrics sections (component-base's logging and metrics options).

use clap::Args;

use super::GO_BOOL;
use super::values::{
    GoDuration, Pairs, ValueError, Vmodule, go_int32, quantity, string_to_string, vmodule,
};
use crate::settings::LogFormat;

/// component-base's `--logging-format` check, with its message.
fn log_format(text: &str) -> Result<LogFormat, ValueError> {
    match text {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(ValueError::LogFormat(text.to_owned())),
    }
}

/// Log lines and metrics.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Logs and metrics flags")]
pub struct LogsMetricsFlags {
    /// Log line format: text or json [default: text]
    #[arg(long, value_name = "FORMAT", value_parser = log_format)]
    pub logging_format: Option<LogFormat>,

    /// kcm's older name of --logging-format (which wins when both are given)
    #[arg(long, value_name = "FORMAT", value_parser = log_format, hide = true)]
    pub log_format: Option<LogFormat>,

    /// Log verbosity (klog's -v): 0-1 info, 2-3 debug, 4 and more trace; RUST_LOG overrides
    #[arg(short = 'v', long = "v", value_name = "LEVEL", value_parser = go_int32, default_value_t = 0)]
    pub verbosity: i32,

    /// Per-source-file verbosity, pattern=N,... (klog's -vmodule): the pattern is a glob over
    /// the Rust file name without .rs (e.g. sync, informer*), or over its path when it holds
    /// a '/' (e.g. controllers/ttl/*); the first matching pattern sets the file's verbosity
    #[arg(long, value_name = "PATTERN=N,...", value_parser = vmodule)]
    pub vmodule: Option<Vmodule>,

    /// Metric families not to register nor serve (fully qualified names), comma-separated
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub disabled_metrics: Vec<String>,

    #[command(flatten)]
    pub unused: UnusedLogsMetricsFlags,
}

unused_flags! {
    /// Log buffering and stream splitting (kcm writes each line to stderr at once) and
    /// metric-label and hidden-metric controls.
    #[command(next_help_heading = "Logs and metrics flags accepted, not used by kcm")]
    pub struct UnusedLogsMetricsFlags {
        log_flush_frequency: GoDuration = "5s";
        log_json_info_buffer_size: String = "0", value_parser = quantity;
        log_json_split_stream: bool = "false", value_name = GO_BOOL;
        log_text_info_buffer_size: String = "0", value_parser = quantity;
        log_text_split_stream: bool = "false", value_name = GO_BOOL;
        allow_metric_labels: Vec<Pairs> = "[]", value_parser = string_to_string;
        allow_metric_labels_manifest: String = "\"\"";
        show_hidden_metrics_for_version: String = "\"\"";
    }
}
