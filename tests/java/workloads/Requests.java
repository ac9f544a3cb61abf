package workloads;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;

/**
 * A server of three endpoints doing distinct work, each request through {@link #handle}:
 * {@code /compute} computes in place ({@link #computeInPlace}); {@code /pool} hands its work
 * to a thread pool ({@link #poolWork}) and to a {@link CompletableFuture} chain — a stage on
 * the pool ({@link #asyncSupply}), then one on the common ForkJoin pool ({@link #asyncStage});
 * {@code /thread} runs its work on a thread of its own ({@link #threadWork}): a virtual thread
 * on JDK 21 and later (built by reflection: compiled for 11), else a new platform thread.
 * Each work method allocates too ({@code long[]} of its own size), so that cpu, wall and
 * alloc profiles all see it; work on threads of its own (a new thread per task where the
 * common pool has fewer than two threads) lasts several CPU-time sampling intervals, which
 * per-thread CPU timers need to see a thread at all. Four request threads loop over the
 * endpoints in turn.
 *
 * <p>Profiled with {@code --by workloads.Requests::handle=arg1}, every sample in a work method
 * belongs to the request that asked for it.
 */
public class Requests {
    static final ExecutorService POOL = Executors.newFixedThreadPool(3);
    static final String[] ENDPOINTS = {"/compute", "/pool", "/thread"};
    static volatile long sink;
    static ThreadFactory virtualThreads;

    static long burn(long seed, int rounds, int words) {
        long s = seed;
        for (int i = 0; i < rounds; i++) {
            s += i * 31L ^ (s >>> 3);
            if ((i & 1023) == 0) {
                long[] garbage = new long[words];
                garbage[0] = s;
                s += garbage.length;
            }
        }
        return s;
    }

    static long computeInPlace(long seed) {
        return burn(seed, 1_500_000, 64);
    }

    static long poolWork(long seed) {
        return burn(seed, 1_000_000, 96);
    }

    static long asyncSupply(long seed) {
        return burn(seed, 1_000_000, 80);
    }

    static long asyncStage(long seed) {
        return burn(seed, 1_500_000, 112);
    }

    static long threadWork(long seed) {
        return burn(seed, 3_000_000, 48);
    }

    /** One request. */
    static long handle(String uri, long seed) throws Exception {
        switch (uri) {
            case "/compute":
                return computeInPlace(seed);
            case "/pool": {
                Future<Long> pooled = POOL.submit(() -> poolWork(seed));
                long chained = CompletableFuture.supplyAsync(() -> asyncSupply(seed), POOL)
                        .thenApplyAsync(Requests::asyncStage)
                        .join();
                return pooled.get() + chained;
            }
            default: {
                long[] result = new long[1];
                Runnable work = () -> result[0] = threadWork(seed);
                Thread thread = virtualThreads != null
                        ? virtualThreads.newThread(work)
                        : new Thread(work, "request-thread");
                thread.start();
                thread.join();
                return result[0];
            }
        }
    }

    public static void main(String[] args) throws Exception {
        try {
            Class<?> ofVirtual = Class.forName("java.lang.Thread$Builder$OfVirtual");
            Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
            virtualThreads = (ThreadFactory) ofVirtual.getMethod("factory").invoke(builder);
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            virtualThreads = null;
        }
        for (int t = 0; t < 4; t++) {
            final int first = t;
            Thread requests = new Thread(() -> {
                long seed = first;
                for (int i = first; ; i++) {
                    try {
                        seed += handle(ENDPOINTS[i % ENDPOINTS.length], seed);
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                    sink = seed;
                }
            }, "requests-" + t);
            requests.setDaemon(true);
            requests.start();
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
