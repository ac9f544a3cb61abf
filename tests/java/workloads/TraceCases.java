package workloads;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * Cases for jtap's method tracing that real programs (javac, H2, Jetty) ran into. Actions run
 * on demand: a file named {@code <action><N>} in the working directory runs the action, which
 * ends by printing {@code DONE <action> <N> ...}. Before {@code READY}, it leaves two classes in
 * the states a broad trace meets: {@link BrokenInit} (static initialiser threw) and
 * {@code UsesMissing} (loaded, but linking fails: a class it needs is missing), and creates
 * five lambdas of {@link CaseLambdas} (hidden classes).
 * <ul>
 *   <li>{@code values}: calls {@link CaseValues#show} with values that are hard to print:
 *       strings with control characters, a long string, application objects whose toString()
 *       is costly, multi-line and counted, JDK value types, arrays and collections; prints
 *       {@code DONE values N toString <calls of Costly.toString so far>};</li>
 *   <li>{@code burst}: two threads call {@link CaseHot#tiny} 1,000,000 times each;</li>
 *   <li>{@code overloads}: {@link CaseOverloads#entry} calls {@code work(int)} and
 *       {@code work(String)}, each a few microseconds long.</li>
 * </ul>
 */
public class TraceCases {
    public static void main(String[] args) throws Exception {
        try {
            new BrokenInit();
        } catch (ExceptionInInitializerError expected) {
            // BrokenInit is now in the error state
        }
        ClassLoader missing = new WithoutMissing(TraceCases.class.getClassLoader());
        Class<?> uses = Class.forName("workloads.UsesMissing", false, missing);
        try {
            Class.forName(uses.getName(), true, missing);
            throw new IllegalStateException("UsesMissing linked");
        } catch (NoClassDefFoundError | VerifyError expected) {
            // UsesMissing stays loaded but unlinked
        }
        CaseLambdas.make();
        System.out.println("READY");
        System.out.flush();
        for (int n = 1; ; n++) {
            String action = null;
            while (action == null) {
                for (String candidate : new String[] {"values", "burst", "overloads"}) {
                    if (new File(candidate + n).exists()) {
                        action = candidate;
                    }
                }
                Thread.sleep(5);
            }
            String result = run(action);
            System.out.println("DONE " + action + " " + n + " " + result);
            System.out.flush();
        }
    }

    static String run(String action) throws Exception {
        switch (action) {
            case "values":
                return "toString " + CaseValues.run();
            case "burst":
                Thread[] threads = new Thread[2];
                for (int t = 0; t < threads.length; t++) {
                    threads[t] = new Thread(() -> {
                        long acc = 0;
                        for (int i = 0; i < 1_000_000; i++) {
                            acc += CaseHot.tiny(i);
                        }
                        CaseHot.sink += acc;
                    }, "burst-" + t);
                    threads[t].start();
                }
                for (Thread thread : threads) {
                    thread.join();
                }
                return "ok";
            default:
                return "sum " + CaseOverloads.entry();
        }
    }

    /** Loads classes from the parent's class path itself, except workloads.Missing. */
    static final class WithoutMissing extends ClassLoader {
        WithoutMissing(ClassLoader parent) {
            super(parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals("workloads.Missing")) {
                throw new ClassNotFoundException(name);
            }
            if (!name.equals("workloads.UsesMissing")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> loaded = findLoadedClass(name);
                if (loaded != null) {
                    return loaded;
                }
                try (InputStream in = getParent().getResourceAsStream("workloads/UsesMissing.class")) {
                    byte[] bytes = in.readAllBytes();
                    return defineClass(name, bytes, 0, bytes.length);
                } catch (IOException e) {
                    throw new ClassNotFoundException(name, e);
                }
            }
        }
    }
}

/** Its static initialiser throws: the class ends in the error state. */
final class BrokenInit {
    static final int VALUE = Integer.parseInt("not a number");

    int value() {
        return VALUE;
    }
}

/** Needs {@link Missing} to link (the verifier checks that a Missing is a MissingBase). */
final class UsesMissing {
    static MissingBase make() {
        return new Missing();
    }
}

class MissingBase {
}

/** Present when compiled, absent for the loader of {@link UsesMissing}. */
final class Missing extends MissingBase {
}

/** Lambdas: hidden classes named {@code CaseLambdas$$Lambda...}. */
final class CaseLambdas {
    static final List<IntSupplier> KEPT = new ArrayList<>();

    static int make() {
        int[] n = {0};
        KEPT.add(() -> 1);
        KEPT.add(() -> 2);
        KEPT.add(() -> 3);
        KEPT.add(() -> n[0]);
        KEPT.add(() -> n[0] + 1);
        int sum = 0;
        for (IntSupplier s : KEPT) {
            sum += s.getAsInt();
        }
        return sum;
    }
}

/** Whose toString() is costly, multi-line and counted: a tracer must not call it by default. */
final class Costly {
    static int toStringCalls;
    final int id;
    final String label;
    final long big;
    final Object other;

    Costly(int id, String label) {
        this.id = id;
        this.label = label;
        this.big = 1L << 40;
        this.other = new ArrayList<>();
    }

    @Override
    public String toString() {
        toStringCalls++;
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 40; i++) {
            text.append("Costly line ").append(i).append(" of ").append(label).append('\n');
        }
        return text.toString();
    }
}

/** Whose toString() throws. */
final class Throwing {
    @Override
    public String toString() {
        throw new IllegalStateException("no toString for you");
    }
}

final class CaseValues {
    static Costly show(String controls, String longText, Costly costly, int[] ints, Object[] objects,
            List<Object> list, Map<String, Object> map, BigDecimal decimal, LocalDate date, UUID uuid,
            TimeUnit unit, Class<?> type, char letter, double ratio) {
        return new Costly(costly.id + ints.length + objects.length + list.size() + map.size(), "result\tof show");
    }

    static int run() {
        StringBuilder longText = new StringBuilder();
        for (int i = 0; i < 1000; i++) {
            longText.append((char) ('a' + i % 26));
        }
        int[] ints = new int[12];
        for (int i = 0; i < ints.length; i++) {
            ints[i] = i * i;
        }
        List<Object> list = new ArrayList<>();
        list.add(new Costly(7, "in a list"));
        list.add("line1\nline2");
        Map<String, Object> map = new LinkedHashMap<>();
        map.put("k\n", new Costly(8, "in a map"));
        map.put("n", 5);
        show("tab\there\nnewline\r\u0001bell\u0007 \"quoted\" back\\slash", longText.toString(), new Costly(3, "first"),
            ints, new Object[] {new Throwing(), "s", 4L, new Costly(9, "in an array")}, Collections.unmodifiableList(list), map,
            new BigDecimal("12.50"), LocalDate.of(2024, 2, 29), new UUID(1, 2), TimeUnit.SECONDS, String.class, 'x', 0.5);
        return Costly.toStringCalls;
    }
}

final class CaseHot {
    static long sink;

    static int tiny(int x) {
        return x * 31 + 7;
    }
}

final class CaseOverloads {
    static long spin(int micros) {
        long end = System.nanoTime() + micros * 1000L;
        long n = 0;
        while (System.nanoTime() < end) {
            n++;
        }
        return n;
    }

    static long work(int x) {
        return spin(30) > 0 ? x : 0;
    }

    static long work(String s) {
        return spin(40) > 0 ? s.length() : 0;
    }

    static long entry() {
        return work(1) + work("two") + work(3);
    }
}
