//! The `@workflow/world` 5.0.0-beta.27 schemas the run DO validates with (spec
//! `schemas.md` §6–7), expressed in the [`Schema`] vocabulary with
//! zod's member order (which decides the issue order).
//!
//! Knows no storage.

use std::sync::OnceLock;

use super::zod::Schema::{self, *};

fn string() -> Schema {
    String { max: None }
}
fn number() -> Schema {
    Number { int: false, positive: false }
}
fn boxed(s: Schema) -> Box<Schema> {
    Box::new(s)
}

pub const RUN_STATUSES: &[&str] = &["pending", "running", "completed", "failed", "cancelled"];
pub const STEP_STATUSES: &[&str] = &["pending", "running", "completed", "failed", "cancelled"];
pub const WAIT_STATUSES: &[&str] = &["waiting", "completed"];

/// `WorkflowRunSchema`: a union discriminated by `status`.
pub fn run_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| {
        let variant = |status: Schema, output: Schema, error: Schema, completed_at: Schema| {
            Object(vec![
                ("runId", string()),
                ("status", status),
                ("deploymentId", string()),
                ("workflowName", string()),
                ("specVersion", number().opt()),
                ("executionContext", Record(boxed(Any)).opt()),
                ("input", Any.opt()),
                ("output", output),
                ("error", error),
                ("errorCode", string().opt()),
                ("attributes", DefaultEmptyObject(boxed(Record(boxed(string()))))),
                ("encryptionPublicKey", string().opt()),
                ("expiredAt", Date.opt()),
                ("startedAt", Date.opt()),
                ("completedAt", completed_at),
                ("createdAt", Date),
                ("updatedAt", Date),
            ])
        };
        let none = || Undefined.opt();
        DiscriminatedUnion {
            key: "status",
            options: vec![
                variant(Enum(&["pending", "running"]), none(), none(), none()),
                variant(Literal("cancelled"), none(), none(), Date),
                variant(Literal("completed"), Any, none(), Date),
                variant(Literal("failed"), none(), Any, Date),
            ],
        }
    })
}

/// `StepSchema`.
pub fn step_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| {
        Object(vec![
            ("runId", string()),
            ("stepId", string()),
            ("stepName", string()),
            ("status", Enum(STEP_STATUSES)),
            ("input", Any.opt()),
            ("output", Any.opt()),
            ("error", Any.opt()),
            ("attempt", number()),
            ("startedAt", Date.opt()),
            ("completedAt", Date.opt()),
            ("createdAt", Date),
            ("updatedAt", Date),
            ("retryAfter", Date.opt()),
            ("specVersion", number().opt()),
        ])
    })
}

/// `HookSchema` (the server never produces `resumeContext` / `resumeCapabilities`).
pub fn hook_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| {
        Object(vec![
            ("runId", string()),
            ("hookId", string()),
            ("token", string()),
            ("ownerId", string()),
            ("projectId", string()),
            ("environment", string()),
            ("metadata", Any.opt()),
            ("createdAt", Date),
            ("specVersion", number().opt()),
            ("isWebhook", Boolean.opt()),
            ("isSystem", Boolean.opt()),
            ("tokenRetentionUntil", Date.opt()),
        ])
    })
}

/// `WaitSchema`.
pub fn wait_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| {
        Object(vec![
            ("waitId", string()),
            ("runId", string()),
            ("status", Enum(WAIT_STATUSES)),
            ("resumeAt", Date.opt()),
            ("completedAt", Date.opt()),
            ("createdAt", Date),
            ("updatedAt", Date),
            ("specVersion", number().opt()),
        ])
    })
}

fn event(event_type: &'static str, correlation_required: bool, event_data: Schema) -> Schema {
    Object(vec![
        ("eventType", Literal(event_type)),
        ("correlationId", if correlation_required { string() } else { string().opt() }),
        ("specVersion", number().opt()),
        ("eventData", event_data),
    ])
}

fn data(members: Vec<(&'static str, Schema)>) -> Schema {
    Object(members)
}

fn telemetry() -> Vec<(&'static str, Schema)> {
    let count = || Number { int: true, positive: true }.opt();
    vec![
        ("ttfs", number().opt()),
        ("stso", number().opt()),
        ("stepCount", count()),
        ("eventCount", count()),
        ("rsfs", number().opt()),
        ("finalSchedulingReplay", number().opt()),
        ("optimizations", Array(boxed(string())).opt()),
    ]
}

/// `EventSchema`: the 17 event types intersected with the server members.
pub fn event_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| {
        let record_any = || Record(boxed(Any));
        let record_str = || Record(boxed(string()));
        let writer = DiscriminatedUnion {
            key: "type",
            options: vec![
                Object(vec![("type", Literal("workflow"))]),
                Object(vec![("type", Literal("step")), ("stepId", string()), ("attempt", number())]),
            ],
        };
        let change = Object(vec![("key", string()), ("value", Union(vec![string(), Null]))]);
        let mut step_completed = vec![("stepName", string().opt()), ("workflowName", string().opt()), ("result", Any)];
        step_completed.extend(telemetry());
        let mut step_failed = vec![("stepName", string().opt()), ("error", Any)];
        step_failed.extend(telemetry());
        let options = vec![
            event(
                "run_created",
                false,
                data(vec![
                    ("deploymentId", string()),
                    ("workflowName", string()),
                    ("input", Any),
                    ("executionContext", record_any().opt()),
                    ("attributes", record_str().opt()),
                    ("allowReservedAttributes", LiteralTrue.opt()),
                    ("encryptionPublicKey", string().opt()),
                ]),
            ),
            event(
                "run_started",
                false,
                data(vec![
                    ("input", Any.opt()),
                    ("deploymentId", string().opt()),
                    ("workflowName", string().opt()),
                    ("executionContext", record_any().opt()),
                    ("attributes", record_str().opt()),
                    ("allowReservedAttributes", LiteralTrue.opt()),
                    ("encryptionPublicKey", string().opt()),
                ])
                .opt(),
            ),
            event("run_completed", false, data(vec![("output", Any.opt())])),
            event("run_failed", false, data(vec![("error", Any), ("errorCode", string().opt())])),
            event("run_cancelled", false, data(vec![("cancelReason", String { max: Some(512) }.opt())]).opt()),
            event(
                "attr_set",
                false,
                data(vec![("changes", Array(boxed(change))), ("writer", writer), ("allowReservedAttributes", LiteralTrue.opt())]),
            ),
            event("step_created", true, data(vec![("stepName", string()), ("workflowName", string().opt()), ("input", Any)])),
            event("step_completed", true, data(step_completed)),
            event("step_failed", true, data(step_failed)),
            event("step_retrying", true, data(vec![("stepName", string().opt()), ("error", Any), ("retryAfter", Date.opt())])),
            event(
                "step_started",
                true,
                data(vec![
                    ("stepName", string().opt()),
                    ("attempt", number().opt()),
                    ("workflowName", string().opt()),
                    ("input", Any.opt()),
                    ("ownerMessageId", string().opt()),
                ])
                .opt(),
            ),
            event(
                "hook_created",
                true,
                data(vec![
                    ("token", string()),
                    ("tokenRetentionUntil", Date.opt()),
                    ("metadata", Any.opt()),
                    ("isWebhook", Boolean.opt()),
                    ("isSystem", Boolean.opt()),
                ]),
            ),
            event("hook_received", true, data(vec![("token", string().opt()), ("payload", Any)])),
            event("hook_disposed", true, data(vec![("token", string().opt())]).opt()),
            event("hook_conflict", true, data(vec![("token", string()), ("conflictingRunId", string().opt())])),
            event("wait_created", true, data(vec![("resumeAt", Date)])),
            event("wait_completed", true, data(vec![("resumeAt", Date.opt())]).opt()),
        ];
        Intersection(
            boxed(DiscriminatedUnion { key: "eventType", options }),
            boxed(Object(vec![
                ("runId", string()),
                ("eventId", string()),
                ("createdAt", Date),
                ("occurredAt", Date.opt()),
                ("specVersion", number().opt()),
                ("resumeId", string().opt()),
            ])),
        )
    })
}
