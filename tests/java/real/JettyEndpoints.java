package real;

import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadFactory;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.handler.AbstractHandler;

/**
 * An embedded Jetty 9.4 server of three endpoints doing distinct work, for request labels
 * ({@code profile --by}): {@code /compute} computes in place ({@link #computeInPlace});
 * {@code /pool} hands its work to a thread pool ({@link #poolWork}) and to a
 * {@link CompletableFuture} chain, a stage on the pool ({@link #asyncSupply}) then one on the
 * common ForkJoin pool ({@link #asyncStage}); {@code /thread} runs its work on a thread of its
 * own ({@link #threadWork}): virtual on JDK 21 and later (by reflection: compiled for 11),
 * else a new platform thread. Each work method allocates too. {@code JettyEndpoints <clients>}
 * requests the endpoints in turn from that many client threads.
 */
public class JettyEndpoints {
    static final ExecutorService POOL = Executors.newFixedThreadPool(3);
    static final String[] ENDPOINTS = {"/compute", "/pool", "/thread"};
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

    static long serve(String target, long seed) throws Exception {
        switch (target) {
            case "/compute":
                return computeInPlace(seed);
            case "/pool": {
                Future<Long> pooled = POOL.submit(() -> poolWork(seed));
                long chained = CompletableFuture.supplyAsync(() -> asyncSupply(seed), POOL)
                        .thenApplyAsync(JettyEndpoints::asyncStage)
                        .join();
                return pooled.get() + chained;
            }
            default: {
                long[] result = new long[1];
                Runnable work = () -> result[0] = threadWork(seed);
                Thread thread = virtualThreads != null
                        ? virtualThreads.newThread(work)
                        : new Thread(work, "endpoint-thread");
                thread.start();
                thread.join();
                return result[0];
            }
        }
    }

    /** Serves the three endpoints. */
    public static class Endpoints extends AbstractHandler {
        @Override
        public void handle(String target, Request base, HttpServletRequest request, HttpServletResponse response)
                throws IOException {
            long answer;
            try {
                answer = serve(target, target.length());
            } catch (Exception e) {
                throw new IOException(e);
            }
            response.setContentType("text/plain");
            response.setStatus(200);
            response.getWriter().println(answer);
            base.setHandled(true);
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
        int clients = Integer.parseInt(args[0]);
        JettyLoad.requestInTurn(clients, JettyLoad.serve(new Endpoints()), ENDPOINTS);
    }
}
