//! The operator's commands (transcriber, agent, DM fallback) as offload
//! specs: they run with the bridge's environment minus the bot token, and
//! the end of their stderr is kept for the operator
//! ([`super::stderr_tail`]).

use smolcord::offload;
use std::time::Duration;

/// The spec for one of the operator's commands (transcriber, agent, DM
/// fallback): the bridge's environment minus the bot token, which those
/// programs have no business seeing.
pub(crate) fn tool_command(argv: Vec<String>, timeout: Duration) -> offload::CommandSpec {
    let mut spec = offload::CommandSpec::new(argv, timeout);
    spec.env = offload::CommandEnv::InheritWithout(vec!["DISCORD_TOKEN".into()]);
    spec.stderr_tail = Some(super::stderr_tail::CAPTURED);
    spec
}
