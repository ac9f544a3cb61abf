package workloads;

/**
 * Calls through megamorphic call sites in hot loops, so that compiled code spends much of its
 * time in HotSpot's vtable stubs (`virtualLoop`, an abstract class's method over five
 * receiver classes) and itable stubs (`interfaceLoop`, an interface's method over five
 * classes), where AsyncGetCallTrace cannot start a walk. The callees are tiny and kept out of
 * line. Prints READY once both threads run; runs until killed.
 */
public class Megamorphic {
    static volatile long sink;

    abstract static class Shape {
        abstract int area(int x);
    }

    interface Op {
        int apply(int x);
    }

    static final class A extends Shape implements Op {
        int area(int x) { return x + 1; }
        public int apply(int x) { return x ^ 1; }
    }

    static final class B extends Shape implements Op {
        int area(int x) { return x + 2; }
        public int apply(int x) { return x ^ 2; }
    }

    static final class C extends Shape implements Op {
        int area(int x) { return x + 3; }
        public int apply(int x) { return x ^ 3; }
    }

    static final class D extends Shape implements Op {
        int area(int x) { return x + 4; }
        public int apply(int x) { return x ^ 4; }
    }

    static final class E extends Shape implements Op {
        int area(int x) { return x + 5; }
        public int apply(int x) { return x ^ 5; }
    }

    static final Object[] OBJECTS = {new A(), new B(), new C(), new D(), new E()};

    static int virtualLoop(Shape[] shapes, int n) {
        int sum = 0;
        for (int i = 0; i < n; i++) {
            sum += shapes[i % shapes.length].area(i);
        }
        return sum;
    }

    static int interfaceLoop(Op[] ops, int n) {
        int sum = 0;
        for (int i = 0; i < n; i++) {
            sum += ops[i % ops.length].apply(i);
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        Shape[] shapes = new Shape[OBJECTS.length];
        Op[] ops = new Op[OBJECTS.length];
        for (int i = 0; i < OBJECTS.length; i++) {
            shapes[i] = (Shape) OBJECTS[i];
            ops[i] = (Op) OBJECTS[i];
        }
        Thread virtual = new Thread(() -> {
            while (true) {
                sink += virtualLoop(shapes, 1_000_000);
            }
        }, "virtual");
        Thread itf = new Thread(() -> {
            while (true) {
                sink += interfaceLoop(ops, 1_000_000);
            }
        }, "interface");
        for (Thread t : new Thread[] {virtual, itf}) {
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
