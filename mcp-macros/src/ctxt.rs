//! Collects errors so the user sees all of them at once.

use std::fmt::Display;

use proc_macro2::Span;

#[derive(Default)]
pub struct Ctxt {
    errors: Option<syn::Error>,
}

impl Ctxt {
    pub fn error(&mut self, span: Span, msg: impl Display) {
        self.push(syn::Error::new(span, msg));
    }

    pub fn push(&mut self, e: syn::Error) {
        match &mut self.errors {
            Some(all) => all.combine(e),
            None => self.errors = Some(e),
        }
    }

    pub fn finish(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

use crate::snapshot::did_you_mean;

pub fn hint(name: &str, candidates: &[&str]) -> String {
    match did_you_mean(name, candidates.iter().copied()) {
        Some(m) => format!("; did you mean `{m}`?"),
        None => String::new(),
    }
}
