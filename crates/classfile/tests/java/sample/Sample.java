import java.util.ArrayList;
import java.util.List;
import java.util.function.IntBinaryOperator;

/** Exercises the constructs the injection points care about; prints deterministic output. */
public class Sample {
    static long counter = 7;
    int value;
    double ratio = 1.5;
    private final Object lock = new Object();

    static class Base {
        final String tag;
        Base(String tag) { this.tag = tag; }
    }

    static class Sub extends Base {
        final int n;
        Sub(int n) {
            super(n > 0 ? "pos" : n < 0 ? "neg" : "zero");
            this.n = n;
            if (n == 13) {
                throw new IllegalArgumentException("unlucky " + n);
            }
        }
        Sub() { this(Math.abs(-3)); }
        @Override public String toString() { return tag + ":" + n; }
    }

    Sample(int v) { value = v; }

    static int add(int a, int b) { return a + b; }
    static long mul(long a, long b) { return a * b; }
    static double div(double a, double b) { return a / b; }
    static float half(float f) { return f / 2; }
    static boolean odd(int x) { return (x & 1) == 1; }
    static char upper(char c) { return Character.toUpperCase(c); }
    static byte low(int x) { return (byte) x; }
    static short mid(int x) { return (short) x; }
    static String greet(String who, long n, double d) { return "hi " + who + " " + n + " " + d; }
    static void nothing() { counter++; }

    static int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

    static int sw(int k) {
        switch (k) {
            case 0: return 10;
            case 1: return 11;
            case 2: return 12;
            case 3: return 13;
            default: return -1;
        }
    }

    static int lookup(int k) {
        switch (k) {
            case -100: return 1;
            case 7: return 2;
            case 100000: return 3;
            default: return 0;
        }
    }

    static String names(String s) {
        switch (s) {
            case "a": return "alpha";
            case "b": return "beta";
            default: return "other";
        }
    }

    static int thrower(int depth) {
        if (depth == 0) {
            throw new IllegalStateException("deep");
        }
        return thrower(depth - 1) + 1;
    }

    static String tryFinally(int x) {
        StringBuilder sb = new StringBuilder();
        try {
            sb.append("try ");
            if (x > 1) {
                throw new RuntimeException("x" + x);
            }
            sb.append("ok ");
            return sb.toString();
        } catch (RuntimeException e) {
            sb.append("caught ").append(e.getMessage()).append(' ');
            return sb.toString();
        } finally {
            sb.append("finally");
            counter += x;
        }
    }

    synchronized int syncMethod(int d) { value += d; return value; }

    int syncBlock(int d) {
        synchronized (lock) {
            value *= d;
            if (value > 1000) {
                return -value;
            }
        }
        return value;
    }

    static int loops(int n) {
        int total = 0;
        outer:
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                if (j > i) continue outer;
                if (i * j > 50) break outer;
                total += i ^ j;
            }
        }
        int k = 0;
        while (k < 5) { k++; total -= k; }
        do { total++; } while (total % 3 != 0);
        return total;
    }

    static String arrays() {
        int[] a = new int[5];
        long[] l = new long[] {1L, 2L};
        String[][] s = new String[2][3];
        int[][][] m = new int[2][2][2];
        Object[] o = {a, l, s};
        for (int i = 0; i < a.length; i++) a[i] = i * i;
        s[1][2] = "x";
        m[1][1][1] = 9;
        return a[4] + " " + l[1] + " " + s[1][2] + " " + m[1][1][1] + " " + o.length;
    }

    static int lambdas() {
        IntBinaryOperator op = (x, y) -> x * 10 + y;
        List<Integer> xs = new ArrayList<>();
        for (int i = 0; i < 5; i++) xs.add(i);
        return xs.stream().mapToInt(Integer::intValue).reduce(0, op);
    }

    static long wideLocals(long a, double b, int c, long d) {
        long x = a + d;
        double y = b * c;
        try {
            if (c == 0) throw new ArithmeticException("zero");
            x += (long) (y / c);
        } catch (ArithmeticException e) {
            x = -1;
        }
        return x;
    }

    public static void main(String[] args) {
        System.out.println(add(2, 3) + " " + mul(6L, 7L) + " " + div(1, 4) + " " + half(5f));
        System.out.println(odd(3) + " " + upper('q') + " " + low(300) + " " + mid(70000));
        System.out.println(greet("bob", 42L, 0.25));
        nothing();
        System.out.println(fact(10) + " " + counter);
        System.out.println(sw(0) + " " + sw(3) + " " + sw(9) + " " + lookup(-100) + " " + lookup(100000) + " " + lookup(5));
        System.out.println(names("a") + " " + names("b") + " " + names("zz"));
        try {
            thrower(5);
        } catch (IllegalStateException e) {
            System.out.println("thrower: " + e.getMessage());
        }
        System.out.println(tryFinally(1) + " | " + tryFinally(2) + " | " + counter);
        Sample s = new Sample(3);
        System.out.println(s.syncMethod(4) + " " + s.syncBlock(5) + " " + s.syncBlock(100) + " " + s.ratio);
        System.out.println(loops(12));
        System.out.println(arrays());
        System.out.println(lambdas());
        System.out.println(wideLocals(5L, 2.5, 2, 7L) + " " + wideLocals(1L, 1.0, 0, 1L));
        System.out.println(new Sub(4) + " " + new Sub(-2) + " " + new Sub(0) + " " + new Sub());
        try {
            new Sub(13);
        } catch (IllegalArgumentException e) {
            System.out.println("ctor: " + e.getMessage());
        }
    }
}
