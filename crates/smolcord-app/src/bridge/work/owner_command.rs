//! The owner's slash commands: what is registered, and the pure verdict on
//! one use of them (an INTERACTION_CREATE): run it, refuse it (said to the
//! user, only them: ephemeral), or ignore it.
//!
//! Only the owner may use them; anyone else is refused and nothing
//! changes. Options are checked here a second time (Discord's client
//! enforces `max_length`, a hand-made request does not): a pairing code of
//! at most [`CODE_MAX_CHARS`] characters, a user as an id or a mention.
//! Whether the answer is deferred is decided here too: everything that
//! touches the disk (approve, deny, revoke) defers, since an fsync on a
//! slow SD card may take longer than Discord's 3 s; `status` and the
//! refusals answer at once from memory; `restart` answers at once (its
//! answer does not wait for its disk writes: the decision is made).

use crate::bridge::access::pairing::normalize;
use smolcord::protocol::{Interaction, Snowflake, INTERACTION_APPLICATION_COMMAND};
use smolcord::rest::{ApplicationCommand, CommandOption};

/// The longest pairing code taken (codes are 8; spaces and dashes a user
/// typed around them are dropped first).
pub(crate) const CODE_MAX_CHARS: u16 = 32;
/// The longest user option taken: `<@!` + 20 digits + `>`.
pub(crate) const USER_MAX_CHARS: u16 = 24;

/// One of the owner's commands, its options checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OwnerCommand {
    /// Approve the pairing code (normalized), as `smolcord pair` does.
    Approve(String),
    /// Drop the pairing code: its user is not approved.
    Deny(String),
    /// Take a user off the allowed list.
    Revoke(Snowflake),
    /// The bridge's state in a few lines.
    Status,
    /// Exit for the supervisor to start it again, as `!restart`.
    Restart,
}

impl OwnerCommand {
    /// Its name, for the log (options left out: a pairing code is not
    /// logged).
    pub fn name(&self) -> &'static str {
        match self {
            OwnerCommand::Approve(_) => "/approve",
            OwnerCommand::Deny(_) => "/deny",
            OwnerCommand::Revoke(_) => "/revoke",
            OwnerCommand::Status => "/status",
            OwnerCommand::Restart => "/restart",
        }
    }

    /// Whether the answer waits for work that may outlast Discord's 3 s
    /// (disk writes on the blocking pool): answered "thinking…" at once,
    /// the text follows as an edit.
    pub fn deferred(&self) -> bool {
        matches!(
            self,
            OwnerCommand::Approve(_) | OwnerCommand::Deny(_) | OwnerCommand::Revoke(_)
        )
    }
}

/// What becomes of a use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The owner's command: run it.
    Run(OwnerCommand),
    /// Said to the user who used it (ephemeral); nothing else happens.
    Refuse(String),
    /// Not a command (another interaction type): nothing to answer.
    Ignore(&'static str),
}

/// The commands registered at start, usable only in a DM with the bot
/// (`contexts: [1]`): the owner talks to the bot there, and nobody in a
/// server is offered them.
pub(crate) fn specs() -> Vec<ApplicationCommand> {
    let code = |what: &str| CommandOption::string("code", what, CODE_MAX_CHARS);
    vec![
        ApplicationCommand::new(
            "approve",
            "Approve a pairing code (as `smolcord pair CODE`)",
        )
        .option(code("The code the user was given"))
        .only_in_bot_dm(),
        ApplicationCommand::new("deny", "Drop a pairing code: its user is not approved")
            .option(code("The code the user was given"))
            .only_in_bot_dm(),
        ApplicationCommand::new("revoke", "Take a user off the allowed list")
            .option(CommandOption::string(
                "user",
                "The user's id (or a mention)",
                USER_MAX_CHARS,
            ))
            .only_in_bot_dm(),
        ApplicationCommand::new("status", "The bridge's state, as `smolcord status` says it")
            .only_in_bot_dm(),
        ApplicationCommand::new("restart", "Restart the bridge (as `!restart`)").only_in_bot_dm(),
    ]
}

/// The verdict on `interaction`, used by whoever it names, with `owner`
/// the bridge's owner (none yet: nobody is).
pub(crate) fn judge(interaction: &Interaction, owner: Option<Snowflake>) -> Verdict {
    if interaction.kind != INTERACTION_APPLICATION_COMMAND {
        return Verdict::Ignore("not an application command");
    }
    let (Some(data), Some(user)) = (&interaction.data, interaction.invoker()) else {
        return Verdict::Ignore("a command without its data or its user");
    };
    if owner != Some(user.id) {
        return Verdict::Refuse("Only the owner of this bridge can use its commands.".into());
    }
    let option = |name: &str| data.option_str(name).unwrap_or_default();
    match data.name.as_str() {
        "approve" => code(option("code")).map(OwnerCommand::Approve),
        "deny" => code(option("code")).map(OwnerCommand::Deny),
        "revoke" => user_id(option("user")).map(OwnerCommand::Revoke),
        "status" => Ok(OwnerCommand::Status),
        "restart" => Ok(OwnerCommand::Restart),
        // Registered by an older version, or by hand.
        other => Err(format!(
            "`/{}` is not one of this bridge's commands (approve, deny, revoke, status, restart).",
            other.chars().take(32).collect::<String>()
        )),
    }
    .map_or_else(Verdict::Refuse, Verdict::Run)
}

fn code(typed: &str) -> Result<String, String> {
    let code = normalize(typed);
    let fits = !code.is_empty()
        && code.chars().count() <= usize::from(CODE_MAX_CHARS)
        && code.chars().all(|c| c.is_ascii_alphanumeric());
    if fits {
        Ok(code)
    } else {
        Err(format!(
            "A pairing code is 1 to {CODE_MAX_CHARS} letters and digits (the user got one like `ABCD2345`)."
        ))
    }
}

fn user_id(typed: &str) -> Result<Snowflake, String> {
    let bare = typed.trim();
    let bare = bare
        .strip_prefix("<@")
        .and_then(|rest| rest.strip_suffix('>'))
        .map_or(bare, |inner| inner.trim_start_matches('!'));
    let digits = !bare.is_empty() && bare.len() <= 20 && bare.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| bare.parse().ok())
        .flatten()
        .ok_or_else(|| "A user is their id (digits) or a mention like <@123>.".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::protocol::{CommandData, CommandOptionValue, InteractionToken, User};

    const OWNER: Snowflake = Snowflake::new(7);

    fn used(by: u64, name: &str, options: &[(&str, &str)]) -> Interaction {
        Interaction {
            id: Snowflake::new(1),
            application_id: Snowflake::new(2),
            kind: INTERACTION_APPLICATION_COMMAND,
            data: Some(CommandData {
                id: Snowflake::new(3),
                name: name.into(),
                kind: 1,
                options: options
                    .iter()
                    .map(|(n, v)| CommandOptionValue {
                        name: (*n).into(),
                        kind: 3,
                        value: Some((*v).into()),
                    })
                    .collect(),
            }),
            guild_id: None,
            channel_id: Some(Snowflake::new(4)),
            member: None,
            user: Some(User {
                id: Snowflake::new(by),
                username: "u".into(),
                discriminator: None,
                global_name: None,
                bot: None,
            }),
            token: InteractionToken::new("t").unwrap(),
        }
    }

    #[test]
    fn the_truth_table() {
        let run = |c| Verdict::Run(c);
        let cases: Vec<(Interaction, Option<Snowflake>, Result<Verdict, &str>)> = vec![
            (
                used(7, "approve", &[("code", "abcd-2345")]),
                Some(OWNER),
                Ok(run(OwnerCommand::Approve("ABCD2345".into()))),
            ),
            (
                used(7, "deny", &[("code", "ABCD2345")]),
                Some(OWNER),
                Ok(run(OwnerCommand::Deny("ABCD2345".into()))),
            ),
            (
                used(7, "revoke", &[("user", "<@!1234>")]),
                Some(OWNER),
                Ok(run(OwnerCommand::Revoke(Snowflake::new(1234)))),
            ),
            (
                used(7, "revoke", &[("user", "99")]),
                Some(OWNER),
                Ok(run(OwnerCommand::Revoke(Snowflake::new(99)))),
            ),
            (
                used(7, "status", &[]),
                Some(OWNER),
                Ok(run(OwnerCommand::Status)),
            ),
            (
                used(7, "restart", &[]),
                Some(OWNER),
                Ok(run(OwnerCommand::Restart)),
            ),
            // Anyone else, or nobody owning the bridge yet: refused.
            (
                used(8, "approve", &[("code", "ABCD2345")]),
                Some(OWNER),
                Err("Only the owner"),
            ),
            (used(8, "restart", &[]), None, Err("Only the owner")),
            // Options Discord's client would not send.
            (used(7, "approve", &[]), Some(OWNER), Err("pairing code")),
            (
                used(7, "approve", &[("code", &"A".repeat(33))]),
                Some(OWNER),
                Err("pairing code"),
            ),
            (
                used(7, "deny", &[("code", "AB/CD")]),
                Some(OWNER),
                Err("pairing code"),
            ),
            (
                used(7, "revoke", &[("user", "bob")]),
                Some(OWNER),
                Err("id (digits)"),
            ),
            (
                used(7, "revoke", &[("user", &"9".repeat(21))]),
                Some(OWNER),
                Err("id (digits)"),
            ),
            (used(7, "frobnicate", &[]), Some(OWNER), Err("not one of")),
        ];
        for (interaction, owner, want) in cases {
            let got = judge(&interaction, owner);
            match (&got, want) {
                (got, Ok(want)) => assert_eq!(got, &want),
                (Verdict::Refuse(text), Err(part)) => assert!(text.contains(part), "{text}"),
                (got, Err(part)) => panic!("{got:?}, wanted a refusal with {part:?}"),
            }
        }
        let mut ping = used(7, "status", &[]);
        ping.kind = 1;
        assert!(matches!(judge(&ping, Some(OWNER)), Verdict::Ignore(_)));
    }

    #[test]
    fn what_touches_the_disk_is_deferred() {
        assert!(OwnerCommand::Approve("A".into()).deferred());
        assert!(OwnerCommand::Revoke(OWNER).deferred());
        assert!(!OwnerCommand::Status.deferred());
        assert!(!OwnerCommand::Restart.deferred());
    }

    #[test]
    fn every_spec_is_dm_only_and_within_discords_rules() {
        let specs = specs();
        assert_eq!(specs.len(), 5);
        for spec in specs {
            assert_eq!(spec.contexts, Some(vec![1]), "{}", spec.name);
            assert!((1..=32).contains(&spec.name.len()));
            assert!(
                (1..=100).contains(&spec.description.chars().count()),
                "{}",
                spec.name
            );
        }
    }
}
