//! The outcome of `applyEvent`: a success (what the event created or changed, for the
//! answer and the retention bookkeeping) or a failure (a code and message, answered with
//! HTTP 200 and nothing written). Knows nothing of how an event is applied.

use crate::run::events::Page;
use crate::run::records::Record;
use crate::wire::Value;

/// Failure codes of `applyEvent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    RunNotFound,
    StepNotFound,
    HookNotFound,
    WaitNotFound,
    EntityConflict,
    RunExpired,
    TooEarly,
    RunNotSupported,
    /// 0.4: the `hookClaimId` of a `hook_created` was fenced by `resolveHookTokenClaim`.
    HookClaimCancelled,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::RunNotFound => "RUN_NOT_FOUND",
            Code::StepNotFound => "STEP_NOT_FOUND",
            Code::HookNotFound => "HOOK_NOT_FOUND",
            Code::WaitNotFound => "WAIT_NOT_FOUND",
            Code::EntityConflict => "ENTITY_CONFLICT",
            Code::RunExpired => "RUN_EXPIRED",
            Code::TooEarly => "TOO_EARLY",
            Code::RunNotSupported => "RUN_NOT_SUPPORTED",
            Code::HookClaimCancelled => "HOOK_CLAIM_CANCELLED",
        }
    }
}

/// A failure outcome (HTTP 200, nothing written).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: Code,
    pub message: String,
    pub retry_after_seconds: Option<f64>,
    pub run_spec_version: Option<Value>,
}

pub fn fail(code: Code, message: String) -> Failure {
    Failure { code, message, retry_after_seconds: None, run_spec_version: None }
}

/// A success outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Success {
    pub event: Option<Record>,
    pub run: Option<Record>,
    pub step: Option<Record>,
    pub hook: Option<Record>,
    pub wait: Option<Record>,
    pub step_created: bool,
    pub released_hooks: Vec<(Value, Value)>,
    pub run_created: Option<(Value, i64)>,
    pub hook_to_index: Option<Record>,
    pub page: Option<Page>,
    pub max_events: Option<f64>,
}

pub type Outcome = Result<Success, Failure>;
