package workloads;

import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;

/**
 * Opens files, for BTrace's FileTrackerJfr sample: round N starts when a file named
 * {@code go<N>} appears in the working directory; it writes {@code out-N-<i>.txt} (through
 * {@code new FileOutputStream(File, false)}) and reads it back (through
 * {@code new FileInputStream(File)}) for i in 0..3, then prints {@code DONE <N>}.
 */
public class FileOpener {
    public static void main(String[] args) throws Exception {
        System.out.println("READY");
        for (int round = 1; ; round++) {
            while (!new File("go" + round).exists()) {
                Thread.sleep(10);
            }
            for (int i = 0; i < 3; i++) {
                File file = new File("out-" + round + "-" + i + ".txt");
                try (FileOutputStream out = new FileOutputStream(file, false)) {
                    out.write(i);
                }
                try (FileInputStream in = new FileInputStream(file)) {
                    in.read();
                }
            }
            System.out.println("DONE " + round);
        }
    }
}
