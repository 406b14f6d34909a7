//! The access book of a running bridge: who is in ([`Access`]), the
//! pairing codes ([`PairingBook`]) and the rules that change them (trust
//! on first use, the re-read after `smolcord pair`, issuing and approving
//! codes), with the files they are kept in. Callers say what happened;
//! the book decides and writes. No borrow leaves a method or is held
//! across an `.await`.

use crate::bridge::access::book::{self, Access, Role};
use crate::bridge::access::pairing::{
    self, PairingBook, PairingCode, PairingDecision, PairingRules,
};
use crate::status::now_unix_ms;
use event_listener::{Event, EventListener};
use smolcord::offload;
use smolcord::protocol::Snowflake;
use std::cell::RefCell;
use std::path::PathBuf;

/// What a trust-on-first-use claim came to.
#[derive(Debug)]
pub(crate) enum OwnerClaim {
    /// The user is the owner now, on disk.
    Taken,
    /// Someone else got there first (or TOFU closed): the user's role now.
    Closed(Role),
    /// `access.json` could not be written (logged): nobody became the
    /// owner.
    Unsaved,
}

/// `access.json` and `pairing.json` in memory, with their rules.
pub(crate) struct AccessBook {
    state_dir: PathBuf,
    /// The config's `tofu`.
    tofu: bool,
    rules: PairingRules,
    access: RefCell<Access>,
    pairing: RefCell<PairingBook>,
    /// A pairing code was issued: the results poller must start watching
    /// for its approval.
    code_issued: Event,
}

impl AccessBook {
    pub fn new(
        state_dir: PathBuf,
        tofu: bool,
        rules: PairingRules,
        access: Access,
        pairing: PairingBook,
    ) -> AccessBook {
        AccessBook {
            state_dir,
            tofu,
            rules,
            access: RefCell::new(access),
            pairing: RefCell::new(pairing),
            code_issued: Event::new(),
        }
    }

    pub fn role(&self, user: Snowflake) -> Role {
        self.access.borrow().role(user)
    }

    pub fn owner(&self) -> Option<Snowflake> {
        self.access.borrow().owner()
    }

    /// Everyone answered: the owner first, then the allowed users.
    pub fn answered_users(&self) -> Vec<Snowflake> {
        self.access.borrow().answered_users()
    }

    /// TOFU may make someone the owner now.
    pub fn tofu_open(&self) -> bool {
        self.access.borrow().tofu_open(self.tofu)
    }

    /// The user's role, re-reading `access.json` first if they look like a
    /// stranger (an approval by `smolcord pair` may have just landed).
    pub async fn fresh_role(&self, user: Snowflake) -> Role {
        let role = self.role(user);
        if role != Role::Stranger {
            return role;
        }
        self.reread().await;
        self.role(user)
    }

    /// Re-reads `access.json` if it changed.
    pub async fn reread(&self) {
        let path = book::access_path(&self.state_dir);
        match offload::read_bytes(&path).await {
            Ok(bytes) => {
                self.access.borrow_mut().apply_reread(&path, bytes);
            }
            Err(e) => log::warn!("re-reading access state: {e}"),
        }
    }

    /// Reads `access.json` with the restore rule (at READY); on an error
    /// the state in memory stays.
    pub async fn restore(&self) -> Result<(), offload::Error> {
        let (loaded, bytes) = book::load_with_restore(&self.state_dir).await?;
        self.access.borrow_mut().apply_load(loaded, bytes);
        Ok(())
    }

    /// Trust on first use: `user` claims the owner's place. Claimed in
    /// memory before the first await, so two first messages cannot both
    /// become the owner; given back if the file cannot be written.
    pub async fn claim_owner(&self, user: Snowflake) -> OwnerClaim {
        let file = {
            let mut access = self.access.borrow_mut();
            if !access.tofu_open(self.tofu) {
                return OwnerClaim::Closed(access.role(user));
            }
            access.file.owner_id = Some(user);
            access.file.clone()
        };
        match book::save(&self.state_dir, &file).await {
            Ok(()) => {
                log::info!("trust on first use: user {user} is now the owner");
                self.access.borrow_mut().remember_written(None);
                OwnerClaim::Taken
            }
            Err(e) => {
                log::error!("saving the TOFU owner failed: {e}; not taking this user as the owner");
                self.access.borrow_mut().file.owner_id = None;
                OwnerClaim::Unsaved
            }
        }
    }

    /// A stranger wrote from `channel`: what they get. A new code is on
    /// disk before it is returned (a code the operator cannot approve is
    /// worse than none: an error instead), and wakes
    /// [`AccessBook::code_issued`]'s listeners.
    pub async fn on_stranger(
        &self,
        user: Snowflake,
        channel: Snowflake,
    ) -> Result<PairingDecision, offload::Error> {
        let decision =
            self.pairing
                .borrow_mut()
                .on_stranger(user, channel, now_unix_ms(), &self.rules, |n| {
                    fastrand::usize(..n)
                });
        if let PairingDecision::Issue(_) = decision {
            let file = self.pairing.borrow().file.clone();
            pairing::save(&self.state_dir, &file).await?;
            self.code_issued.notify(1);
        }
        Ok(decision)
    }

    /// Codes waiting for approval now.
    pub fn live_codes(&self) -> usize {
        self.pairing.borrow().live_codes(now_unix_ms())
    }

    /// The owner's `/deny`: drops the pairing code `code` (normalized) and
    /// saves the book. Returns the user it was for (`None`: no such code).
    pub async fn deny_code(&self, code: &str) -> Result<Option<Snowflake>, offload::Error> {
        let (user, file) = {
            let mut book = self.pairing.borrow_mut();
            let user = book
                .file
                .codes
                .iter()
                .find(|c| c.code == code)
                .map(|c| c.user_id);
            book.file.codes.retain(|c| c.code != code);
            (user, book.file.clone())
        };
        if user.is_some() {
            pairing::save(&self.state_dir, &file).await?;
        }
        Ok(user)
    }

    /// The owner's `/revoke`: takes `user` off `access.json`'s allowed
    /// list (the restore rule first; a corrupt file is never overwritten).
    /// `Ok(false)`: they were not on it.
    pub async fn revoke(&self, user: Snowflake) -> Result<bool, String> {
        let mut file = book::load_for_update(&self.state_dir).await?;
        if !file.allowed_user_ids.remove(&user) {
            return Ok(false);
        }
        book::save(&self.state_dir, &file)
            .await
            .map_err(|e| e.to_string())?;
        self.reread().await;
        Ok(true)
    }

    /// Whether codes wait for approval now.
    pub fn codes_pending(&self) -> bool {
        self.pairing.borrow().live_codes(now_unix_ms()) > 0
    }

    /// Wakes when a pairing code is issued.
    pub fn code_issued(&self) -> EventListener {
        self.code_issued.listen()
    }

    /// While codes are pending: re-reads `access.json`, drops expired
    /// codes and takes the approved ones (one per user, to tell them),
    /// saving the pairing book if that changed it.
    pub async fn take_approved(&self) -> Vec<PairingCode> {
        if !self.codes_pending() {
            return Vec::new();
        }
        self.reread().await;
        let (approved, file) = {
            let access = self.access.borrow();
            let mut book = self.pairing.borrow_mut();
            let now = now_unix_ms();
            let pruned = book.prune(now, &self.rules);
            let approved = book.take_approved(now, |user| access.role(user) != Role::Stranger);
            let changed = pruned || !approved.is_empty();
            (approved, changed.then(|| book.file.clone()))
        };
        if let Some(file) = file {
            if let Err(e) = pairing::save(&self.state_dir, &file).await {
                log::warn!("saving the pairing book: {e}");
            }
        }
        approved
    }
}
