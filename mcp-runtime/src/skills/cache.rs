//! The verified files of one server's skills, kept for reads whose held entry still
//! names the same digest.

use std::collections::{HashMap, VecDeque};

use super::content::SkillContent;

/// Verified files of one server's skills, served again while the held entry's digest
/// for the file is unchanged. Bounded (oldest out first).
#[derive(Default)]
pub(crate) struct FileCache {
    files: HashMap<String, (String, SkillContent)>,
    order: VecDeque<String>,
    bytes: usize,
}

/// What the cache of one client may hold.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

impl FileCache {
    pub(crate) fn get(&self, uri: &str, digest: &str) -> Option<SkillContent> {
        self.files
            .get(uri)
            .filter(|(d, _)| d == digest)
            .map(|(_, c)| c.clone())
    }

    pub(crate) fn put(&mut self, digest: &str, content: &SkillContent) {
        let len = content.bytes().len();
        if len > CACHE_BYTES / 4 {
            return;
        }
        if let Some((_, old)) = self.files.remove(&content.uri) {
            self.bytes -= old.bytes().len();
            self.order.retain(|u| u != &content.uri);
        }
        while self.bytes + len > CACHE_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, old)) = self.files.remove(&oldest) {
                self.bytes -= old.bytes().len();
            }
        }
        self.bytes += len;
        self.order.push_back(content.uri.clone());
        self.files
            .insert(content.uri.clone(), (digest.to_owned(), content.clone()));
    }
}
