//! Routing policy. Pure functions of a statement's classification, the
//! session's situation and the group's settings; the proxy does the I/O.
//!
//! - [`rules`]: the ordered rules that pick a role (primary or replica) and
//!   name the rule that decided, so operators can ask why.
//! - [`plan`]: the whole plan of a statement (target, rule, consistency
//!   requirement, retry and pipelining eligibility), the value a session
//!   executes and `EXPLAIN ROUTE` shows.
//! - [`effects`]: what a statement leaves behind on its session once its
//!   answer is in (pins, the hold on the primary, insert id, GTID), the
//!   value the session applies.
//! - [`balance`]: which server of a role takes a read.

pub mod balance;
pub mod effects;
pub mod plan;
pub mod rules;

pub use balance::{pick, pick_weighted, Load};
pub use effects::{effects, Answer, Effects, Pins, Ran, Statement};
pub use plan::{
    plan, plan_execute, Command, GroupFacts, Plan, Prepared, ReadRequirement, Refusal, Retry,
};
pub use rules::{decide, Cursor, Decision, Rule, SessionFacts, Target};
