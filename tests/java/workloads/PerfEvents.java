package workloads;

import java.nio.ByteBuffer;

/**
 * Three threads, each leading one kind of perf event: {@code toucher} maps fresh memory and
 * touches every page of it (page faults, in {@link #touch}), {@code sleeper} sleeps a
 * millisecond at a time (context switches and {@code sched:sched_switch}, in {@link #nap}),
 * {@code spinner} only computes. Prints {@code READY} once all run.
 */
public class PerfEvents {
    static volatile long sink;

    /** Allocates 4 MiB of direct memory, which the JVM zeroes: a fault per fresh page. */
    static void touch() {
        ByteBuffer buffer = ByteBuffer.allocateDirect(4 << 20);
        for (int i = 0; i < buffer.capacity(); i += 4096) {
            buffer.put(i, (byte) i);
        }
        sink += buffer.get(4096);
    }

    static void nap() throws InterruptedException {
        Thread.sleep(1);
    }

    static long spin(long x) {
        for (int i = 0; i < 1_000_000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        Thread toucher = new Thread(() -> {
            while (true) {
                touch();
            }
        }, "toucher");
        Thread sleeper = new Thread(() -> {
            try {
                while (true) {
                    nap();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sleeper");
        Thread spinner = new Thread(() -> {
            long x = 1;
            while (true) {
                x = spin(x);
                sink = x;
            }
        }, "spinner");
        for (Thread t : new Thread[] {toucher, sleeper, spinner}) {
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
