//! The reader set: finding, creating and registering readers.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::checkpoint::{checkpoint_too_large, encode_checkpoint, encode_registry};
use crate::config::ReaderConfig;
use crate::files::{checkpoint_path, registry_path};
use crate::name::{check_file_names, validate_name};
use crate::next::duration_ms;
use crate::reader::Reader;
use crate::reader_state::{new_shared, ReaderShared, ReaderState};
use crate::retire::write_checkpoint;
use crate::state::Inner;
use crate::storage::{replace, replace_atomically};
use crate::sync::{lock, read_lock, write_lock};
use crate::JournalError;

/// A registry write that failed. `renamed`: only the folder's sync failed, after the new
/// registry took the old one's place, so the folder names the new set of readers (until a
/// crash may bring the old one back). The reader set in memory then follows the folder,
/// and the error is still returned.
struct RegistryFailed {
    error: JournalError,
    renamed: bool,
}

impl Inner {
    /// Replaces the registry file (nothing is written for a read-only queue).
    fn write_registry(&self, names: &[String]) -> Result<(), RegistryFailed> {
        if self.read_only {
            return Ok(());
        }
        let path = registry_path(&self.dir, &self.name);
        replace(
            self.storage(),
            &path,
            &encode_registry(names),
            self.config.file_mode,
        )
        .map_err(|f| RegistryFailed {
            error: JournalError::io(&path, f.error),
            renamed: f.renamed,
        })
    }

    /// Removes the checkpoint of a reader whose creation failed, and makes that durable
    /// (a failure is logged: the file then stays for the next open to judge).
    fn undo_checkpoint(&self, path: &std::path::Path) {
        if self.read_only {
            return;
        }
        let undone = match self.storage().remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => self.storage().sync_dir(&self.dir),
        };
        if let Err(e) = undone {
            tracing::error!(path = %path.display(), error = %e, "could not remove the checkpoint of a reader whose creation failed; the next open may take the reader from it");
        }
    }

    pub(crate) fn reader(
        self: &Arc<Self>,
        name: &str,
        config: Option<ReaderConfig>,
    ) -> Result<Reader, JournalError> {
        self.check_open()?;
        if !name.is_empty() {
            validate_name(name)?;
        }
        let _registry = lock(&self.registry);
        let (existing, only_default, mut names) = {
            let readers = read_lock(&self.readers);
            let names: Vec<String> = readers.iter().map(|r| r.name()).collect();
            let existing = readers.iter().find(|r| r.name() == name).cloned();
            let only_default = names.len() == 1 && names[0].is_empty();
            (existing, only_default.then(|| readers[0].clone()), names)
        };
        let handle = |shared: Arc<ReaderShared>| {
            if let Some(c) = config {
                if c.has_limits() {
                    self.limited.store(true, Ordering::Release);
                }
                lock(&shared.state).config = c;
            }
            Reader {
                inner: self.clone(),
                shared,
            }
        };
        if let Some(shared) = existing {
            return Ok(handle(shared));
        }
        if name.is_empty() {
            return Err(JournalError::NoDefaultReader);
        }
        // A new reader, checked before anything is written: a checkpoint file the file
        // system cannot name would leave it without one. (A reader an earlier version
        // registered under such a name is still handed out above.)
        check_file_names(&self.name, Some(name))?;
        if let Some(default) = only_default {
            // The first named reader takes over the default reader's position.
            let mut failed = None;
            let old_path = {
                let mut cp = lock(&default.cp);
                let data = {
                    // The checkpoint written here counts as the reader's last one.
                    let mut st = lock(&default.state);
                    let now = self.config.clock.coarse_now_ms();
                    st.checkpoint_due_ms =
                        now.saturating_add(duration_ms(self.config.checkpoint_interval));
                    crate::checkpoint::Checkpoint {
                        tail_segment: self.tail_segment(),
                        ..st.checkpoint_data()
                    }
                };
                let new_path = checkpoint_path(&self.dir, &self.name, name);
                if !self.read_only {
                    if let Some(reason) = checkpoint_too_large(&data) {
                        let e = std::io::Error::new(std::io::ErrorKind::FileTooLarge, reason);
                        return Err(JournalError::io(&new_path, e));
                    }
                    replace_atomically(
                        self.storage(),
                        &new_path,
                        &encode_checkpoint(&data),
                        self.config.file_mode,
                    )
                    .map_err(|e| JournalError::io(&new_path, e))?;
                }
                match self.write_registry(&[name.to_string()]) {
                    Ok(()) => {}
                    Err(RegistryFailed {
                        error,
                        renamed: false,
                    }) => {
                        // The default reader goes on, and its checkpoint moves on from the
                        // one just written: left behind without a registry, that older one
                        // would be taken for the named reader at the next open (as after a
                        // crash here), and the default reader's newer checkpoint removed.
                        self.undo_checkpoint(&new_path);
                        return Err(error);
                    }
                    // The folder names the new reader: it took over, only not durably (a
                    // crash leaves its checkpoint without a registry, which the next open
                    // completes). Its handles, old and new, go on as that reader.
                    Err(RegistryFailed {
                        error,
                        renamed: true,
                    }) => failed = Some(error),
                }
                if !self.read_only {
                    default
                        .durable_segment
                        .fetch_max(data.head_segment, Ordering::SeqCst);
                }
                *lock(&default.name) = name.to_string();
                std::mem::replace(&mut cp.path, new_path)
            };
            if self.read_only {
                return Ok(handle(default));
            }
            if let Err(e) = self.storage().remove_file(&old_path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %old_path.display(), error = %e, "could not remove the default reader's checkpoint");
            }
            let reader = handle(default);
            return match failed {
                Some(e) => Err(e),
                None => Ok(reader),
            };
        }
        // A further named reader starts at the tail.
        let cfg = config.unwrap_or(self.config.reader);
        if cfg.has_limits() {
            self.limited.store(true, Ordering::Release);
        }
        let shared = {
            // No put in flight: the new reader starts exactly after the last written item.
            let w = self.idle_writer();
            let mut state = ReaderState::new(
                w.end(),
                w.next_id,
                Default::default(),
                Default::default(),
                cfg,
            );
            let (items, bytes) = self.put_totals();
            state.consumed_items = items;
            state.consumed_bytes = bytes;
            let shared = new_shared(
                name.to_string(),
                checkpoint_path(&self.dir, &self.name, name),
                state,
                w.seg_id,
                items,
            );
            write_lock(&self.readers).push(shared.clone());
            self.chunks.track(shared.at.clone());
            shared
        };
        // Its checkpoint first, as for the first named reader: a failure here leaves the
        // reader unregistered (a checkpoint file without a registry entry is stale, and
        // the next open removes it).
        let forget = || {
            write_lock(&self.readers).retain(|r| !Arc::ptr_eq(r, &shared));
            self.chunks.untrack(&shared.at);
            // Under the checkpoint's lock, as `remove_reader` does: a checkpoint of it that
            // another thread is writing finishes first (and is undone next), and none is
            // written after.
            let _cp = lock(&shared.cp);
            shared.removed.store(true, Ordering::Release);
        };
        if let Err(e) = write_checkpoint(self, &shared, true) {
            forget();
            self.undo_checkpoint(&checkpoint_path(&self.dir, &self.name, name));
            return Err(e);
        }
        names.push(name.to_string());
        match self.write_registry(&names) {
            Ok(()) => {}
            Err(RegistryFailed {
                error,
                renamed: false,
            }) => {
                forget();
                self.undo_checkpoint(&checkpoint_path(&self.dir, &self.name, name));
                return Err(error);
            }
            // The folder names it: it stays, with the checkpoint just written.
            Err(RegistryFailed {
                error,
                renamed: true,
            }) => return Err(error),
        }
        Ok(Reader {
            inner: self.clone(),
            shared,
        })
    }

    /// Removes a reader: from the registry, then its checkpoint. Its handles fail from then
    /// on, and segments only it still needed can be retired.
    pub(crate) fn remove_reader(&self, name: &str) -> Result<(), JournalError> {
        self.check_open()?;
        self.check_writable("removing a reader")?;
        let _registry = lock(&self.registry);
        let (victim, names) = {
            let readers = read_lock(&self.readers);
            let victim = readers.iter().find(|r| r.name() == name).cloned();
            let names: Vec<String> = readers
                .iter()
                .map(|r| r.name())
                .filter(|n| n != name)
                .collect();
            (victim, names)
        };
        let Some(victim) = victim else {
            return Err(JournalError::NoSuchReader(name.to_string()));
        };
        if names.is_empty() {
            return Err(JournalError::LastReader(name.to_string()));
        }
        // The registry decides which readers exist; a crash after it leaves a stale
        // checkpoint that the next open removes.
        let failed = match self.write_registry(&names) {
            Ok(()) => None,
            Err(RegistryFailed {
                error,
                renamed: false,
            }) => return Err(error),
            // The folder no longer names the reader: it goes from memory too.
            Err(RegistryFailed {
                error,
                renamed: true,
            }) => Some(error),
        };
        write_lock(&self.readers).retain(|r| !Arc::ptr_eq(r, &victim));
        self.chunks.untrack(&victim.at);
        {
            // Under the checkpoint's lock: a checkpoint being written meanwhile finishes
            // first, and a later one sees the reader removed and writes nothing.
            let cp = lock(&victim.cp);
            victim.removed.store(true, Ordering::Release);
            // A name the file system refuses as too long names no file (a reader an
            // earlier version registered without ever writing its checkpoint).
            match self.storage().remove_file(&cp.path) {
                Err(e)
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidFilename
                    ) =>
                {
                    return Err(JournalError::io(&cp.path, e));
                }
                _ => {}
            }
        }
        self.bell.ring_always();
        if let Some(e) = failed {
            // Segments only the reader needed wait for a later collection: until the
            // registry is durable, a crash may bring the reader back.
            return Err(e);
        }
        self.collect_segments()
    }
}
