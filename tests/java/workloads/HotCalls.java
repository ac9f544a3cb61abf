package workloads;

import java.io.File;
import java.util.concurrent.locks.LockSupport;

/**
 * A hot tiny method called at a steady rate, the workload counting its calls: what a BTrace
 * script counting the calls of {@link #hot} must equal.
 *
 * <p>{@code HotCalls <threads> <calls per second, all threads together> <milliseconds>}
 * prints {@code READY}, then runs rounds on demand (round N starts when a file named
 * {@code go<N>} appears in the working directory): each of the threads calls {@link #hot} at
 * its share of the rate for the given time (a rate of 0: as fast as it can), and the round
 * ends with {@code DONE <N> <calls> <calls per second>}. Between rounds nothing calls
 * {@link #hot}.
 */
public class HotCalls {
    static volatile long sink;

    /** The traced method: tiny, with a call so that every kind of trace instruments it. */
    static int hot(int x) {
        return mix(x) + 1;
    }

    static int mix(int x) {
        return (x * 31) ^ (x >>> 7);
    }

    /** Calls {@link #hot} at {@code rate} calls a second (0: unpaced) until {@code end}. */
    static long run(long rate, long start, long end) {
        long calls = 0;
        int acc = 0;
        while (true) {
            for (int i = 0; i < 1000; i++) {
                acc += hot(i);
            }
            calls += 1000;
            long now = System.nanoTime();
            if (now >= end) {
                break;
            }
            if (rate > 0) {
                // Ahead of the pace: wait until the calls made are due.
                long due = start + calls * 1_000_000_000L / rate;
                if (due > now) {
                    LockSupport.parkNanos(Math.min(due, end) - now);
                }
            }
        }
        sink += acc;
        return calls;
    }

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        long rate = Long.parseLong(args[1]);
        long millis = Long.parseLong(args[2]);
        System.out.println("READY");
        System.out.flush();
        for (int round = 1; ; round++) {
            File go = new File("go" + round);
            while (!go.exists()) {
                Thread.sleep(5);
            }
            long start = System.nanoTime();
            long end = start + millis * 1_000_000L;
            long[] counts = new long[threads];
            Thread[] workers = new Thread[threads];
            for (int t = 0; t < threads; t++) {
                int index = t;
                workers[t] = new Thread(() -> counts[index] = run(rate / threads, start, end), "hot-" + t);
                workers[t].start();
            }
            long calls = 0;
            for (int t = 0; t < threads; t++) {
                workers[t].join();
                calls += counts[t];
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.println("DONE " + round + " " + calls + " " + Math.round(calls / seconds));
            System.out.flush();
        }
    }
}
