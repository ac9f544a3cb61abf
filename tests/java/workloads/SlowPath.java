package workloads;

import java.util.HashMap;
import java.util.Map;
import java.util.function.LongUnaryOperator;

/**
 * Requests whose time goes to one deliberately slow method five interface calls below the
 * entry, for `calltree --auto`: {@code handle} calls {@code Stage.process} (interface), which
 * calls a lambda ({@code LongUnaryOperator.applyAsLong}, interface), whose body calls
 * {@code Service.serve} (interface), which calls {@code Repository.load} (interface, an
 * abstract class's implementation reached by virtual dispatch), which calls
 * {@code Codec.decode} (interface): {@code SlowCodec.decode} spins for about a millisecond. Every
 * level also makes cheap calls (a few microseconds each), and the interfaces have other
 * implementations the workload calls too, so no call site is monomorphic. Two threads run
 * requests until killed; prints READY once they do.
 */
public class SlowPath {
    static volatile long sink;

    /** A little arithmetic, about {@code n} microseconds' worth. */
    static long spin(long seed, int n) {
        long x = seed;
        for (int i = 0; i < n * 1000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        return x;
    }

    interface Stage {
        long process(long request);
    }

    interface Service {
        long serve(long request);
    }

    interface Repository {
        long load(long key);
    }

    interface Codec {
        long decode(long bytes);
    }

    /** The slow call: about a millisecond of its own arithmetic. */
    static final class SlowCodec implements Codec {
        public long decode(long bytes) {
            long x = bytes;
            for (int i = 0; i < 500_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= x >>> 17;
            }
            return x;
        }
    }

    static final class FastCodec implements Codec {
        public long decode(long bytes) {
            return spin(bytes, 2);
        }
    }

    abstract static class AbstractRepository implements Repository {
        abstract long fetch(long key);

        public long load(long key) {
            return fetch(key) + key;
        }
    }

    static final class CachedRepository extends AbstractRepository {
        final Codec codec;
        final Map<Long, Long> hits = new HashMap<>();

        CachedRepository(Codec codec) {
            this.codec = codec;
        }

        long fetch(long key) {
            hits.merge(key & 15, 1L, Long::sum);
            return codec.decode(spin(key, 3));
        }
    }

    static final class MemoryRepository extends AbstractRepository {
        long fetch(long key) {
            return spin(key, 2);
        }
    }

    static final class OrderService implements Service {
        final Repository repository;
        final Repository index = new MemoryRepository();

        OrderService(Repository repository) {
            this.repository = repository;
        }

        public long serve(long request) {
            long checked = index.load(request);
            return repository.load(request ^ checked) + audit(request);
        }

        long audit(long request) {
            return spin(request, 5);
        }
    }

    static final class Router implements Stage {
        final Map<Integer, LongUnaryOperator> routes = new HashMap<>();
        final Service orders;

        Router(Service orders) {
            this.orders = orders;
            routes.put(0, request -> orders.serve(request));
            routes.put(1, request -> spin(request, 4));
        }

        public long process(long request) {
            long cheap = routes.get(1).applyAsLong(request);
            return routes.get(0).applyAsLong(request + cheap);
        }
    }

    static final class EchoStage implements Stage {
        public long process(long request) {
            return spin(request, 3);
        }
    }

    final Stage router = new Router(new OrderService(new CachedRepository(new SlowCodec())));
    final Stage echo = new EchoStage();
    final Service quick = new OrderService(new CachedRepository(new FastCodec()));

    /** The entry: one request. */
    long handle(long request) {
        long header = echo.process(request);
        long warm = quick.serve(request);
        return router.process(request + header + warm) + validate(request);
    }

    static long validate(long request) {
        return spin(request, 4);
    }

    public static void main(String[] args) throws Exception {
        SlowPath app = new SlowPath();
        for (int t = 0; t < 2; t++) {
            Thread worker = new Thread(() -> {
                long i = 0;
                while (true) {
                    sink += app.handle(i++);
                }
            }, "slowpath-" + t);
            worker.setDaemon(true);
            worker.start();
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
