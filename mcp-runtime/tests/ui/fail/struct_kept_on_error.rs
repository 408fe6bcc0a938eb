use mcp_runtime::mcp;

// The attribute is wrong, but the struct is still there: only the attribute's error
// is reported, not a cascade from code that uses the struct.
#[mcp(url = "https://example.com/mcp", drift = loud)]
pub struct Linear {
    pub team: String,
}

impl Linear {
    pub fn team(&self) -> &str {
        &self.team
    }
}

fn main() {
    let l = Linear::new("core".into());
    println!("{}", l.team());
}
