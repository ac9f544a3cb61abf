//! Class names as Java programmers write them, from JVMTI class signatures.

#![deny(unsafe_code)]

/// The Java name of a class given its JVM signature (`GetClassSignature`): `Ljava/lang/String;`
/// → `java.lang.String`, `[I` → `int[]`, `[[Ljava/util/Map$Entry;` → `java.util.Map$Entry[][]`.
/// A signature it does not understand comes back unchanged.
pub fn java_name(signature: &str) -> String {
    let dims = signature.bytes().take_while(|&b| b == b'[').count();
    let element = &signature[dims..];
    let base = match element.as_bytes() {
        [b'L', .., b';'] => element[1..element.len() - 1].replace('/', "."),
        [b'Z'] => "boolean".into(),
        [b'B'] => "byte".into(),
        [b'C'] => "char".into(),
        [b'S'] => "short".into(),
        [b'I'] => "int".into(),
        [b'J'] => "long".into(),
        [b'F'] => "float".into(),
        [b'D'] => "double".into(),
        _ => return signature.to_string(),
    };
    let mut name = base;
    for _ in 0..dims {
        name.push_str("[]");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::java_name;

    #[test]
    fn converts_signatures_to_java_names() {
        let cases = [
            ("Ljava/lang/String;", "java.lang.String"),
            ("[I", "int[]"),
            ("[[J", "long[][]"),
            ("[Z", "boolean[]"),
            ("[Ljava/lang/String;", "java.lang.String[]"),
            ("[[Ljava/util/Map$Entry;", "java.util.Map$Entry[][]"),
            ("Lworkloads/Outer$Inner;", "workloads.Outer$Inner"),
            (
                "Ljava/lang/invoke/LambdaForm$MH+0x0000000800c01000;",
                "java.lang.invoke.LambdaForm$MH+0x0000000800c01000",
            ),
            ("", ""),
            ("[", "["),
            ("Q", "Q"),
        ];
        for (signature, expected) in cases {
            assert_eq!(java_name(signature), expected, "{signature}");
        }
    }
}
