package workloads;

import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.Enumeration;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

/**
 * Benchmark targets for method tracing (scripts/bench-trace.sh).
 * <ul>
 *   <li>{@code calls}: calls {@link #tiny} in a loop (in another class, so that retransforming
 *       this one does not leave the loop running old code) and prints
 *       {@code NS <ns per iteration>} for every window of at least 200 ms, so the cost a probe adds to a
 *       call can be read off (after printing {@code NANOTIME <ns>}, the cost of one
 *       {@code System.nanoTime()} call, for scale);</li>
 *   <li>{@code classes <jar> <n>}: loads the first n classes of a jar (not initialised) and
 *       idles, for timing instrumentation and restoring of many loaded classes.</li>
 * </ul>
 */
public class TraceBench {
    static long sink;

    /**
     * The traced method: tiny, but with a call, so that a trace under a threshold instruments
     * it (a method without calls or loops is left out as too brief to reach any threshold;
     * the JIT inlines {@link #scaled} here, and this into the loop).
     */
    static int tiny(int x) {
        return scaled(x) + 7;
    }

    static int scaled(int x) {
        return x * 31;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("classes")) {
            int wanted = Integer.parseInt(args[2]);
            int loaded = 0;
            URLClassLoader loader = new URLClassLoader(new URL[] {new File(args[1]).toURI().toURL()});
            try (JarFile jar = new JarFile(args[1])) {
                Enumeration<JarEntry> entries = jar.entries();
                while (entries.hasMoreElements() && loaded < wanted) {
                    String name = entries.nextElement().getName();
                    if (!name.endsWith(".class") || name.contains("-info")) {
                        continue;
                    }
                    try {
                        Class.forName(name.substring(0, name.length() - 6).replace('/', '.'), false, loader);
                        loaded++;
                    } catch (Throwable e) {
                        // a class whose dependencies are missing: skip it
                    }
                }
            }
            System.out.println("LOADED " + loaded);
            System.out.println("READY");
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        long t0 = System.nanoTime();
        long acc = 0;
        for (int i = 0; i < 20_000_000; i++) {
            acc += System.nanoTime();
        }
        sink += acc;
        System.out.println("NANOTIME " + (double) (System.nanoTime() - t0) / 20_000_000);
        System.out.println("READY");
        System.out.flush();
        while (true) {
            long start = System.nanoTime();
            long calls = 0;
            long elapsed;
            do {
                sink += Loop.window(1_000_000);
                calls += 1_000_000;
                elapsed = System.nanoTime() - start;
            } while (elapsed < 200_000_000L);
            System.out.println("NS " + (double) elapsed / calls);
            System.out.flush();
        }
    }

    /** The calling loop, in a class of its own: retransforming TraceBench leaves it alone. */
    static final class Loop {
        static long window(int n) {
            long s = 0;
            for (int i = 0; i < n; i++) {
                s += tiny(i);
            }
            return s;
        }
    }
}
