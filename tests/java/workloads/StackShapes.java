package workloads;

import java.lang.reflect.Array;
import java.lang.reflect.Method;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.IntFunction;

/**
 * Allocates, and contends for a monitor, under every shape of Java stack a walker meets:
 * frames compiled with inlining and without, interpreted ones ({@code interpreted} is kept out
 * of the JIT by the test's {@code -XX:CompileCommand=exclude}), a lambda, a reflective call
 * ({@code Method.invoke}, a native call back into Java on JDK 11–17), the VM's own allocations
 * in native methods ({@code Object.clone}, {@code Array.newInstance}), deep recursion, and a
 * thread blocked entering a monitor. Two platform threads run it until killed, and on JDK 21
 * and later two virtual threads too, without the monitor (created by reflection: compiled for
 * 11); prints READY.
 */
public class StackShapes {
    static volatile Object sink;
    static final Object LOCK = new Object();

    static final class Box implements Cloneable {
        long value;

        Box copy() throws CloneNotSupportedException {
            return (Box) clone();
        }
    }

    static Object plain(int i) {
        return new long[8 + (i & 7)];
    }

    static Object interpreted(int i) {
        return new int[16 + (i & 7)];
    }

    static Object deep(int depth, int i) {
        return depth == 0 ? new byte[64] : deep(depth - 1, i + 1);
    }

    public static Object reflected(int i) {
        return new char[32];
    }

    static Object locked(int i) {
        synchronized (LOCK) {
            // Long enough under the lock for the other thread to block entering it.
            long spin = System.nanoTime() + 20_000;
            while (System.nanoTime() < spin) {
                Thread.onSpinWait();
            }
            return new short[4];
        }
    }

    static void work(Method reflective, IntFunction<Object> lambda, Box box, boolean contend)
            throws Exception {
        for (int i = 0; ; i++) {
            sink = plain(i);
            sink = interpreted(i);
            sink = deep(20 + (i & 15), i);
            sink = lambda.apply(i);
            sink = reflective.invoke(null, i);
            sink = box.copy();
            sink = Array.newInstance(Box.class, 2);
            if (contend && (i & 63) == 0) {
                sink = locked(i);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Method reflective = StackShapes.class.getMethod("reflected", int.class);
        IntFunction<Object> lambda = i -> new Object[2 + (i & 3)];
        for (int t = 0; t < 2; t++) {
            Thread thread = new Thread(() -> {
                try {
                    work(reflective, lambda, new Box(), true);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "shapes-" + t);
            thread.setDaemon(true);
            thread.start();
        }
        try {
            Method perTask = Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
            ExecutorService executor = (ExecutorService) perTask.invoke(null);
            for (int t = 0; t < 2; t++) {
                executor.submit(() -> {
                    // No monitor: a virtual thread blocked on one unmounts (JDK 24+), and its
                    // lower frames then wait in a heap chunk, which JVMTI walks and jtap's
                    // walker leaves to it.
                    work(reflective, lambda, new Box(), false);
                    return null;
                });
            }
        } catch (NoSuchMethodException beforeJdk21) {
            // platform threads only
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
