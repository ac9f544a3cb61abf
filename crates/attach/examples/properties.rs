//! Minimal use of the attach client: `cargo run -p jtap-attach --example properties -- <pid>`.

use jtap_attach::{AttachOptions, Request, VirtualMachine};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pid: u32 = std::env::args()
        .nth(1)
        .ok_or("usage: properties <pid>")?
        .parse()?;
    let mut vm = VirtualMachine::attach(pid, &AttachOptions::default())?;
    let mut reply = vm.execute(&Request::new("properties", Vec::<String>::new()))?;
    print!("{}", reply.output_to_string()?);
    Ok(())
}
