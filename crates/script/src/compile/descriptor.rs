//! BTrace's probe descriptors: the XML files (`<namespace>.xml`) that map an `@OnProbe`
//! handler's `namespace` and `name` to the `@OnMethod` probes it stands for, each `<map>`
//! one probe with its `clazz`, `method`, `type` and `location` (`value`, `where`, `line`).

use crate::ast::{Location, Probe};

/// The probes of probe `name` in descriptor `xml` (the text of `<namespace>.xml`).
pub(crate) fn probes(xml: &str, name: &str) -> Result<Vec<Probe>, String> {
    let xml = without_comments(xml);
    let probe = elements(&xml, "probe")
        .into_iter()
        .find(|(attributes, _)| attribute(attributes, "name") == Some(name))
        .ok_or_else(|| format!("the probe descriptor has no probe {name:?}"))?;
    let maps = elements(probe.1, "map");
    if maps.is_empty() {
        return Err(format!("probe {name:?} maps to no method (no <map>)"));
    }
    maps.into_iter().map(|(_, map)| mapped(map)).collect()
}

/// One `<map>` as the probe it stands for.
fn mapped(map: &str) -> Result<Probe, String> {
    let class = text(map, "clazz").ok_or("a <map> without <clazz>")?;
    let location = elements(map, "location").first().map(|l| l.1).unwrap_or("");
    let kind = text(location, "value").unwrap_or_else(|| "ENTRY".into());
    let after = text(location, "where").is_some_and(|w| w.ends_with("AFTER"));
    let kind = kind.rsplit('.').next().unwrap_or("").to_string();
    let location = match kind.as_str() {
        "ENTRY" => Location::Entry,
        "RETURN" => Location::Return,
        "ERROR" => Location::Error,
        "LINE" => Location::Line(
            text(location, "line")
                .and_then(|l| l.parse::<u32>().ok())
                .filter(|&l| l > 0),
        ),
        "SYNC_ENTRY" | "SYNC_EXIT" => Location::Sync {
            exit: kind == "SYNC_EXIT",
        },
        "ARRAY_GET" | "ARRAY_SET" => Location::Array {
            write: kind == "ARRAY_SET",
            after,
        },
        "THROW" => Location::Throw,
        "CATCH" => Location::Catch,
        "CHECKCAST" | "INSTANCEOF" => Location::TypeCheck {
            instance_of: kind == "INSTANCEOF",
        },
        other => {
            return Err(format!(
                "a probe descriptor's <location> of Kind.{other} is not run by jtap (write the @OnMethod instead)"
            ))
        }
    };
    Ok(Probe {
        class,
        method: text(map, "method").unwrap_or_else(|| "/.*/".into()),
        descriptor: text(map, "type").unwrap_or_default(),
        location,
        target: None,
    })
}

/// `xml` without its `<!-- -->` comments.
fn without_comments(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(at) = rest.find("<!--") {
        out.push_str(&rest[..at]);
        rest = rest[at..]
            .find("-->")
            .map_or("", |end| &rest[at + end + 3..]);
    }
    out.push_str(rest);
    out
}

/// The `<tag ...>content</tag>` elements of `xml` (not nested in one another), as their
/// attributes' text and content.
fn elements<'x>(xml: &'x str, tag: &str) -> Vec<(&'x str, &'x str)> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        // `<probe` but not `<probes`.
        if !after.starts_with(['>', ' ', '\t', '\n', '\r']) {
            rest = after;
            continue;
        }
        let Some(gt) = after.find('>') else { break };
        let content = &after[gt + 1..];
        let Some(end) = content.find(&close) else {
            break;
        };
        found.push((&after[..gt], &content[..end]));
        rest = &content[end + close.len()..];
    }
    found
}

/// The trimmed text of the first `<tag>` of `xml`.
fn text(xml: &str, tag: &str) -> Option<String> {
    elements(xml, tag)
        .first()
        .map(|(_, content)| content.trim().to_string())
}

/// Attribute `name`'s value in an element's attribute text (`name="value"`).
fn attribute<'a>(attributes: &'a str, name: &str) -> Option<&'a str> {
    let at = attributes.find(&format!("{name}="))?;
    let value = &attributes[at + name.len() + 1..];
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &value[1..];
    value.find(quote).map(|end| &value[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<?xml version="1.0"?>
<!-- a <probe name="commented"> -->
<btrace-probes namespace="app.net">
    <probe name="bind">
        <map>
            <clazz>app.Server</clazz>
            <method>bind</method>
            <type>void (java.net.SocketAddress, int)</type>
        </map>
        <map>
            <clazz>app.Channel</clazz>
            <method>bind</method>
            <location><value>RETURN</value></location>
        </map>
    </probe>
    <probe name="call"><map><clazz>a.B</clazz><location><value>CALL</value></location></map></probe>
</btrace-probes>
"#;

    #[test]
    fn each_map_is_a_probe() {
        let bind = probes(XML, "bind").unwrap();
        assert_eq!(bind.len(), 2);
        assert_eq!(bind[0].class, "app.Server");
        assert_eq!(bind[0].descriptor, "void (java.net.SocketAddress, int)");
        assert_eq!(bind[0].location, Location::Entry);
        assert_eq!(bind[1].location, Location::Return);
        assert!(probes(XML, "commented").unwrap_err().contains("no probe"));
        assert!(probes(XML, "call")
            .unwrap_err()
            .contains("Kind.CALL is not run"));
    }
}
