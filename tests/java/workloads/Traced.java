package workloads;

import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntUnaryOperator;
import java.util.function.Supplier;

/**
 * Targets for jtap's method tracing tests. Runs rounds on demand (round N starts when a file
 * named {@code go<N>} appears in the working directory), or a given number at once, each ending
 * by printing
 * {@code DONE <N> <result>}. Every round runs the same work, so results with and without
 * tracing can be compared:
 * <ul>
 *   <li>8 threads each call {@link #sleepy} 10 times (20 ms each), counted by the workload;</li>
 *   <li>{@link #a} calls b (20 ms) and c (10 ms + d, 40 ms): a known call tree;</li>
 *   <li>{@link Shapes#run} exercises constructors (one throwing), static initialisers,
 *       interface default/static methods, bridge/generic methods, lambdas and method
 *       references, recursion, try/catch/finally, switches and exceptions thrown through
 *       several frames, a synchronized block and a method longer than 32 KiB;</li>
 *   <li>{@link #describe} takes and returns objects whose toString() throws or is traced.</li>
 * </ul>
 */
public class Traced {
    static final AtomicLong SLEEPY_CALLS = new AtomicLong();
    static final AtomicLong SLEEPY_NANOS = new AtomicLong();

    static void sleepy(int i) throws InterruptedException {
        Thread.sleep(20);
    }

    /** The workload's own timing of the last a() call: a, b, c, d totals and c's offset in a (ns). */
    static final long[] TREE_NANOS = new long[5];

    static void a() throws InterruptedException {
        long start = System.nanoTime();
        Thread.sleep(5);
        b();
        TREE_NANOS[4] = System.nanoTime() - start;
        c();
        TREE_NANOS[0] = System.nanoTime() - start;
    }

    static void b() throws InterruptedException {
        long start = System.nanoTime();
        Thread.sleep(20);
        TREE_NANOS[1] = System.nanoTime() - start;
    }

    static void c() throws InterruptedException {
        long start = System.nanoTime();
        Thread.sleep(10);
        d();
        TREE_NANOS[2] = System.nanoTime() - start;
    }

    static void d() throws InterruptedException {
        long start = System.nanoTime();
        Thread.sleep(40);
        TREE_NANOS[3] = System.nanoTime() - start;
    }

    /** toString() throws. */
    static final class Hostile {
        @Override
        public String toString() {
            throw new IllegalStateException("no toString for you");
        }
    }

    /** toString() is itself traced (pattern workloads.Traced$*::*) and calls other methods. */
    static final class Chatty {
        final int n;

        Chatty(int n) {
            this.n = n;
        }

        @Override
        public String toString() {
            return "Chatty(" + twice(n) + ")";
        }

        int twice(int x) {
            return 2 * x;
        }
    }

    static Object describe(Object first, Object second, int[] numbers, List<String> words, Map<String, Integer> map) {
        return new Chatty(numbers.length + words.size() + map.size() + (first == null ? 0 : 1) + (second == null ? 0 : 1));
    }

    static long round() throws Exception {
        int threads = 8;
        CountDownLatch done = new CountDownLatch(threads);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                try {
                    for (int i = 0; i < 10; i++) {
                        long start = System.nanoTime();
                        sleepy(i);
                        SLEEPY_NANOS.addAndGet(System.nanoTime() - start);
                        SLEEPY_CALLS.incrementAndGet();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    done.countDown();
                }
            }, "sleepy-" + t);
            workers.add(worker);
            worker.start();
        }
        done.await();
        a();
        long result = Shapes.run();
        List<String> words = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            words.add("w" + i);
        }
        Map<String, Integer> map = new HashMap<>();
        map.put("k", 1);
        Object described = describe(new Hostile(), new Chatty(3), new int[] {1, 2, 3}, words, map);
        return result * 31 + described.toString().hashCode();
    }

    /** With an argument N: runs N rounds at once, then exits; else rounds on demand. */
    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : Integer.MAX_VALUE;
        System.out.println("READY");
        System.out.flush();
        for (int round = 1; round <= rounds; round++) {
            File go = new File("go" + round);
            while (args.length == 0 && !go.exists()) {
                Thread.sleep(5);
            }
            SLEEPY_CALLS.set(0);
            SLEEPY_NANOS.set(0);
            long result = round();
            System.out.println("DONE " + round + " " + result + " sleepy " + SLEEPY_CALLS.get() + " " + SLEEPY_NANOS.get()
                + " tree " + TREE_NANOS[0] + " " + TREE_NANOS[1] + " " + TREE_NANOS[2] + " " + TREE_NANOS[3] + " " + TREE_NANOS[4]);
            System.out.flush();
        }
    }
}

/** Method shapes the instrumentation must handle. */
final class Shapes {
    static final long SEED;

    static {
        long s = 7;
        for (int i = 0; i < 10; i++) {
            s = s * 31 + i;
        }
        SEED = s;
    }

    interface Greeter {
        String name();

        default String greet() {
            return "hello " + name();
        }

        static Greeter of(String n) {
            return () -> n;
        }
    }

    abstract static class Box<T extends Comparable<T>> {
        abstract T get();

        int compareTo(Box<T> other) {
            return get().compareTo(other.get());
        }
    }

    static final class IntBox extends Box<Integer> {
        final int v;

        IntBox(int v) {
            this.v = v;
        }

        @Override
        Integer get() { // a bridge method Object get() is generated
            return v;
        }
    }

    static final class Fragile {
        final int v;

        Fragile(int v) {
            super();
            if (v < 0) {
                throw new IllegalArgumentException("negative " + v);
            }
            this.v = v;
        }
    }

    static int fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static int control(int x) {
        int r = 0;
        try {
            switch (x % 4) {
                case 0:
                    r = 10;
                    break;
                case 1:
                    r = 20;
                    break;
                default:
                    r = x;
            }
            switch (x * 1000) {
                case 1000:
                    r += 1;
                    break;
                case 50000:
                    r += 2;
                    break;
                default:
                    r += 3;
            }
            if (x == 3) {
                throw new IllegalStateException("three");
            }
        } catch (IllegalStateException e) {
            r = -r;
        } finally {
            r += 100;
        }
        return r;
    }

    static void deepThrow(int depth) {
        if (depth == 0) {
            throw new UnsupportedOperationException("deep");
        }
        deepThrow(depth - 1);
    }

    static long run() {
        long acc = SEED;
        acc += Greeter.of("jtap").greet().length();
        Box<Integer> one = new IntBox(1);
        Box<Integer> two = new IntBox(2);
        acc += one.compareTo(two);
        try {
            new Fragile(-1);
        } catch (IllegalArgumentException e) {
            acc += 5;
        }
        acc += new Fragile(4).v;
        acc += fib(15);
        for (int i = 0; i < 6; i++) {
            acc += control(i);
        }
        try {
            deepThrow(5);
        } catch (UnsupportedOperationException e) {
            acc += 7;
        }
        IntUnaryOperator square = x -> x * x;
        Supplier<Integer> ref = Shapes::seven;
        acc += square.applyAsInt(9) + ref.get();
        acc += Long32k.big(3);
        char[] letters = new char[4];
        Object[] single = new Object[1];
        String[][] grid = new String[2][3];
        acc += letters.length + single.length + grid.length * grid[0].length;
        synchronized (Shapes.class) {
            acc += new StringBuilder("jtap").length();
        }
        return acc;
    }

    static int seven() {
        return 7;
    }
}
