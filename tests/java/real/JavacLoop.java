package real;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.FileObject;
import javax.tools.ForwardingJavaFileManager;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.eclipse.jdt.core.compiler.batch.BatchCompiler;

/**
 * A real compiler in a loop: {@code JavacLoop <javac|ecj> <source dir> <threads>} compiles
 * every {@code .java} file under the directory without writing class files, round after
 * round on each thread. {@code javac} is the JDK's own compiler through {@code javax.tools}
 * ({@code ToolProvider.getSystemJavaCompiler()}; only JDKs with the {@code jdk.compiler}
 * module have it), class files going to byte arrays that are dropped; {@code ecj} is the
 * Eclipse compiler of Debian's {@code ecj.jar} (which lacks ECJ's {@code javax.tools}
 * provider) through its {@code BatchCompiler} with {@code -d none}, on any JDK. A round that
 * reports an error is printed on stderr and not counted. Progress: rounds done.
 */
public class JavacLoop {
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[1]);
        Runnable round = args[0].equals("javac") ? javacRound(dir) : () -> ecjRound(dir);
        int threads = Integer.parseInt(args[2]);
        Progress progress = new Progress();
        Progress.startThreads("compile", threads, () -> {
            while (true) {
                try {
                    round.run();
                    progress.add();
                } catch (Throwable e) {
                    Progress.failed("compiling", e);
                }
            }
        });
        progress.reportForever();
    }

    static Runnable javacRound(Path dir) throws IOException {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        if (javac == null) {
            throw new IllegalStateException("this runtime has no jdk.compiler module");
        }
        List<SourceFile> sources = sources(dir);
        return () -> {
            try {
                compile(javac, sources);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
    }

    /** One ECJ round; throws if it reports an error. */
    static void ecjRound(Path dir) {
        StringWriter messages = new StringWriter();
        PrintWriter out = new PrintWriter(messages);
        String[] options = {"-11", "-g", "-nowarn", "-proc:none", "-d", "none", dir.toString()};
        if (!BatchCompiler.compile(options, out, out, null)) {
            out.flush();
            throw new IllegalStateException("ecj reported errors:\n" + messages);
        }
    }

    static List<SourceFile> sources(Path dir) throws IOException {
        try (Stream<Path> files = Files.walk(dir)) {
            List<SourceFile> sources = new ArrayList<>();
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).sorted().collect(Collectors.toList())) {
                sources.add(new SourceFile(file, new String(Files.readAllBytes(file), StandardCharsets.UTF_8)));
            }
            return sources;
        }
    }

    /** One round: compiles every source; throws if the compiler reports an error. */
    static void compile(JavaCompiler compiler, List<SourceFile> sources) throws IOException {
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        StandardJavaFileManager standard = compiler.getStandardFileManager(diagnostics, null, StandardCharsets.UTF_8);
        try (InMemoryOutput files = new InMemoryOutput(standard)) {
            List<String> options = List.of("-g", "-nowarn", "-proc:none", "-source", "11", "-target", "11");
            boolean ok = compiler.getTask(null, files, diagnostics, options, null, sources).call();
            if (!ok || files.classes == 0) {
                StringBuilder why = new StringBuilder("compiler reported errors (" + files.classes + " classes):");
                for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
                    if (d.getKind() == Diagnostic.Kind.ERROR) {
                        why.append('\n').append(d);
                    }
                }
                throw new IllegalStateException(why.toString());
            }
        }
    }

    /** A source file held in memory. */
    static final class SourceFile extends SimpleJavaFileObject {
        final String text;

        SourceFile(Path path, String text) {
            super(path.toUri(), Kind.SOURCE);
            this.text = text;
        }

        @Override
        public CharSequence getCharContent(boolean ignoreEncodingErrors) {
            return text;
        }
    }

    /** Class files written to byte arrays, counted, then dropped. */
    static final class InMemoryOutput extends ForwardingJavaFileManager<StandardJavaFileManager> {
        int classes;

        InMemoryOutput(StandardJavaFileManager standard) {
            super(standard);
        }

        @Override
        public JavaFileObject getJavaFileForOutput(Location location, String className, JavaFileObject.Kind kind, FileObject sibling) {
            classes++;
            return new SimpleJavaFileObject(URI.create("mem:///" + className.replace('.', '/') + kind.extension), kind) {
                @Override
                public OutputStream openOutputStream() {
                    return new ByteArrayOutputStream();
                }
            };
        }
    }
}
