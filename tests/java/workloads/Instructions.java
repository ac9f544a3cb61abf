package workloads;

import java.io.File;

/**
 * Targets for BTrace's instruction locations (ARRAY_GET, ARRAY_SET, INSTANCEOF, CHECKCAST,
 * THROW, CATCH). Round N starts when a file named {@code go<N>} appears in the working
 * directory and ends by printing {@code DONE <N> <result>}; each round calls {@link #work}
 * once.
 */
public class Instructions {
    static final int[] SQUARES = new int[4];

    /** Writes 9 at index 2 and reads it back, tests and casts a String, catches a throw. */
    static int work(Object thing) {
        int[] squares = SQUARES;
        squares[2] = 9;
        int nine = squares[2];
        int length = 0;
        if (thing instanceof String) {
            length = ((String) thing).length();
        }
        try {
            fail(nine);
        } catch (IllegalStateException e) {
            length += e.getMessage().length();
        }
        return nine + length;
    }

    static void fail(int n) {
        throw new IllegalStateException("n=" + n);
    }

    public static void main(String[] args) throws Exception {
        System.out.println("READY");
        for (int n = 1; ; n++) {
            File go = new File("go" + n);
            while (!go.exists()) {
                Thread.sleep(10);
            }
            System.out.println("DONE " + n + " " + work("text"));
        }
    }
}
