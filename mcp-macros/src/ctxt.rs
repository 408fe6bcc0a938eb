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

/// The closest candidate to `name`, when close enough to be a typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    /// Edit distance counting a swap of neighbours as one edit (optimal string
    /// alignment), so `ulr` is one edit from `url`.
    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1) && *d < name.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

pub fn hint(name: &str, candidates: &[&str]) -> String {
    match did_you_mean(name, candidates.iter().copied()) {
        Some(m) => format!("; did you mean `{m}`?"),
        None => String::new(),
    }
}
