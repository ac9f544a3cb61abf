package workloads;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * Burns CPU in three methods on three threads in a 1:2:4 ratio: the threads take turns (a
 * baton passed with park/unpark), burnOne doing one unit of work per round, burnTwo two and
 * burnFour four, so the ratio holds however busy the machine is. Prints READY once running;
 * runs until killed, or for the number of seconds given as the first argument, then prints
 * DONE and exits with 0. A second argument, the duty (default 1), makes the round end with a
 * pause so that the three use only that fraction of a core.
 */
public class Burn {
    static volatile long sink;
    /**
     * Iterations in one unit of work: about 6 ms once compiled on every JDK, longer than a scheduler tick,
     * so that tick-based timers see each turn in proportion to its length.
     */
    static final int UNIT = 4_000_000;
    /**
     * The burn loop's constants, in fields the JIT cannot fold: from JDK 21, C2 folds an
     * unrolled {@code x * A + C} with constant A and C into one step per several iterations,
     * and a unit took 0.4 ms instead of 6 (turns shorter than the samplers' intervals).
     */
    static long multiplier = 6364136223846793005L;
    static long increment = 1442695040888963407L;
    static volatile int turn;
    static final Thread[] THREADS = new Thread[3];
    /**
     * Wall-clock nanoseconds each thread has spent in its burn method so far: on a busy machine
     * the scheduler stretches long turns more than short ones, and the wall-clock shares drift
     * from 1:2:4 (a test compares a wall-clock profile with these).
     */
    static final AtomicLongArray SPENT = new AtomicLongArray(3);
    static double duty = 1.0;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : Double.MAX_VALUE;
        duty = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        THREADS[0] = new Thread(() -> take(0, 1), "burn-one");
        THREADS[1] = new Thread(() -> take(1, 2), "burn-two");
        THREADS[2] = new Thread(() -> take(2, 4), "burn-four");
        for (Thread t : THREADS) {
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        long end = System.nanoTime() + (long) Math.min(seconds * 1e9, Long.MAX_VALUE / 2);
        while (System.nanoTime() < end) {
            Thread.sleep(Math.max(1, Math.min(100, (end - System.nanoTime()) / 1_000_000)));
        }
        System.out.println("DONE");
        System.exit(0);
    }

    /** Thread `me`: wait for the baton, do `units` units of work, pass the baton on. */
    static void take(int me, int units) {
        long roundStart = System.nanoTime();
        while (true) {
            while (turn != me) {
                LockSupport.park();
            }
            long started = System.nanoTime();
            for (int i = 0; i < units; i++) {
                if (me == 0) {
                    burnOne(UNIT);
                } else if (me == 1) {
                    burnTwo(UNIT);
                } else {
                    burnFour(UNIT);
                }
            }
            SPENT.addAndGet(me, System.nanoTime() - started);
            if (me == 2 && duty < 1.0) {
                long busy = System.nanoTime() - roundStart;
                LockSupport.parkNanos((long) (busy * (1 / duty - 1)));
                roundStart = System.nanoTime();
            }
            turn = (me + 1) % 3;
            LockSupport.unpark(THREADS[(me + 1) % 3]);
        }
    }

    static void burnOne(int iterations) {
        long x = sink, a = multiplier, c = increment;
        for (int i = 0; i < iterations; i++) {
            x = x * a + c;
        }
        sink = x;
    }

    static void burnTwo(int iterations) {
        long x = sink, a = multiplier, c = increment;
        for (int i = 0; i < iterations; i++) {
            x = x * a + c;
        }
        sink = x;
    }

    static void burnFour(int iterations) {
        long x = sink, a = multiplier, c = increment;
        for (int i = 0; i < iterations; i++) {
            x = x * a + c;
        }
        sink = x;
    }
}
