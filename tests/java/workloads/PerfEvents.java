package workloads;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;

/**
 * Three threads, each leading one kind of perf event: {@code toucher} maps fresh memory and
 * touches every page of it (page faults, in {@link #touch}), {@code sleeper} sleeps a
 * millisecond at a time (context switches and {@code sched:sched_switch}, in {@link #nap}),
 * {@code spinner} only computes. Prints {@code READY} once all run.
 *
 * <p>The toucher's memory is fresh only if glibc maps each buffer anew and unmaps it when it is
 * freed: run it with {@code MALLOC_MMAP_THRESHOLD_} below a buffer's size. By default glibc
 * raises its threshold to the size of the first mapped block freed, and from then on keeps
 * freed buffers for reuse, whose pages fault no more.
 */
public class PerfEvents {
    static volatile long sink;

    /**
     * {@code sun.misc.Unsafe.invokeCleaner} on the instance: frees a direct buffer at once,
     * instead of when a collection finds it unreachable (named by reflection: javac warns of
     * the class by name).
     */
    static final MethodHandle FREE = free();

    static MethodHandle free() {
        try {
            Class<?> unsafe = Class.forName("sun.misc.Unsafe");
            Field instance = unsafe.getDeclaredField("theUnsafe");
            instance.setAccessible(true);
            MethodType type = MethodType.methodType(void.class, ByteBuffer.class);
            return MethodHandles.lookup()
                    .findVirtual(unsafe, "invokeCleaner", type)
                    .bindTo(instance.get(null));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Allocates 1 MiB of direct memory, which the JVM zeroes (a fault per fresh page), writes
     * to every page of it, and frees it.
     */
    static void touch() throws Throwable {
        ByteBuffer buffer = ByteBuffer.allocateDirect(1 << 20);
        for (int i = 0; i < buffer.capacity(); i += 4096) {
            buffer.put(i, (byte) i);
        }
        sink += buffer.get(4096);
        FREE.invokeExact(buffer);
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
            try {
                while (true) {
                    touch();
                    // A fault at a time is a sample at a time: about 25,000 a second.
                    Thread.sleep(10);
                }
            } catch (Throwable e) {
                throw new IllegalStateException(e);
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
