package workloads;

import java.lang.reflect.Method;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.locks.LockSupport;

/**
 * 1,000 virtual threads (JDK 21 and later; compiled for 11, so created by reflection) each
 * calling {@link #step} in a loop: a little work, then a 2 ms park inside the method, so the
 * virtual thread leaves its carrier in the middle of every call.
 */
public class VirtualParkers {
    static volatile long sink;

    static void step() {
        long s = 0;
        for (int i = 0; i < 2_000; i++) {
            s += i * 31L ^ (s >>> 3);
        }
        sink += s;
        LockSupport.parkNanos(2_000_000);
    }

    public static void main(String[] args) throws Exception {
        Method perTask = Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
        ExecutorService executor = (ExecutorService) perTask.invoke(null);
        for (int t = 0; t < 1_000; t++) {
            executor.submit(() -> {
                while (true) {
                    step();
                }
            });
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
