package workloads;

/**
 * Entry calls whose call trees overflow: what `calltree -n 1` and a session ending inside an
 * entry call must stay bounded on.
 *
 * <p>{@code TreeFlood wide} prints {@code READY}, then calls {@link #wide} in a loop, 100 ms
 * apart, printing {@code WIDE <n> <end, ms since the epoch>} after each: one call makes
 * 300,000 calls (more than a tree holds) through a static call, an interface call and a
 * string concatenation ({@code invokedynamic}), then {@link #maybe} twice (one returns null).
 * {@code TreeFlood long} calls {@link #endless}, an entry call that makes such calls until
 * the JVM ends.
 */
public class TreeFlood {
    interface Step {
        int apply(int x);
    }

    static final class Twice implements Step {
        public int apply(int x) {
            return x * 2;
        }
    }

    static volatile long sink;
    static final Step STEP = new Twice();

    static int leaf(int x) {
        return (x * 31) ^ (x >>> 7);
    }

    static long wide() {
        long sum = 0;
        for (int i = 0; i < 100_000; i++) {
            sum += leaf(i);
            sum += STEP.apply(i);
            sum += ("n" + i).length();
        }
        return sum;
    }

    /** Null for even numbers. */
    static String maybe(int n) {
        return n % 2 == 0 ? null : "odd " + n;
    }

    static void endless() {
        while (true) {
            sink += wide();
        }
    }

    public static void main(String[] args) throws Exception {
        System.out.println("READY");
        System.out.flush();
        if (args.length > 0 && args[0].equals("long")) {
            endless();
        }
        for (int n = 1; ; n++) {
            sink += wide();
            sink += String.valueOf(maybe(n)).length() + String.valueOf(maybe(n + 1)).length();
            System.out.println("WIDE " + n + " " + System.currentTimeMillis());
            System.out.flush();
            Thread.sleep(100);
        }
    }
}
