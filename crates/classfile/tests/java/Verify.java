import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Loads and links every class under a directory with a fresh class loader, so that HotSpot
 * verifies each one (classes of non-boot loaders are verified by default), and prints one line
 * per failure: KIND, class, message. Linking without initializing is forced through
 * getDeclaredMethods(), which links the class first.
 */
public class Verify {
    static final class DirLoader extends ClassLoader {
        private final Path root;

        DirLoader(Path root, ClassLoader parent) {
            super(parent);
            this.root = root;
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            Path p = root.resolve(name.replace('.', '/') + ".class");
            try {
                byte[] b = Files.readAllBytes(p);
                return defineClass(name, b, 0, b.length);
            } catch (IOException e) {
                throw new ClassNotFoundException(name);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Path root = Paths.get(args[0]);
        List<String> names = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            s.filter(p -> p.toString().endsWith(".class")).forEach(p -> {
                String rel = root.relativize(p).toString();
                names.add(rel.substring(0, rel.length() - 6).replace('/', '.'));
            });
        }
        names.sort(null);
        DirLoader loader = new DirLoader(root, Verify.class.getClassLoader());
        int ok = 0, verify = 0, format = 0, other = 0;
        for (String n : names) {
            try {
                Class<?> c = Class.forName(n, false, loader);
                c.getDeclaredMethods();
                ok++;
            } catch (VerifyError e) {
                verify++;
                System.out.println("VERIFY\t" + n + "\t" + oneLine(e.getMessage()));
            } catch (ClassFormatError e) {
                format++;
                System.out.println("FORMAT\t" + n + "\t" + oneLine(e.getMessage()));
            } catch (Throwable e) {
                other++;
                System.out.println("OTHER\t" + n + "\t" + oneLine(e.toString()));
            }
        }
        System.out.println("TOTAL\t" + names.size() + "\tok " + ok + "\tverify " + verify + "\tformat " + format
                + "\tother " + other + "\tprobes " + jtap.verify.Probes.calls);
    }

    static String oneLine(String s) {
        return s == null ? "" : s.replace('\n', ' ').replace('\t', ' ');
    }
}
