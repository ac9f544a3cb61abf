package workloads;

import java.io.FileInputStream;
import java.io.IOException;
import java.util.Random;
import java.util.zip.Deflater;

/**
 * Spends its time outside Java: a "native-deflate" thread compresses a buffer with
 * java.util.zip.Deflater over and over (zlib, called through the JNI method
 * Deflater.deflateBytesBytes), and a "native-urandom" thread reads /dev/urandom in 64 KiB
 * blocks (the kernel generates the bytes inside the read system call). Prints READY once
 * running; runs until killed, or for the number of seconds given as the first argument.
 */
public class NativeWork {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : Double.MAX_VALUE;
        Thread deflate = new Thread(NativeWork::deflateForever, "native-deflate");
        Thread urandom = new Thread(NativeWork::readUrandomForever, "native-urandom");
        for (Thread t : new Thread[] {deflate, urandom}) {
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        long end = System.nanoTime() + (long) Math.min(seconds * 1e9, Long.MAX_VALUE / 2);
        while (System.nanoTime() < end) {
            Thread.sleep(Math.max(1, Math.min(100, (end - System.nanoTime()) / 1_000_000)));
        }
        System.out.println("DONE");
        System.exit(0);
    }

    /** Compresses 1 MiB of text-like bytes at the highest level, again and again. */
    static void deflateForever() {
        byte[] input = new byte[1 << 20];
        Random random = new Random(42);
        for (int i = 0; i < input.length; i++) {
            input[i] = (byte) ('a' + random.nextInt(12));
        }
        byte[] output = new byte[input.length + 1024];
        while (true) {
            Deflater deflater = new Deflater(Deflater.BEST_COMPRESSION);
            deflater.setInput(input);
            deflater.finish();
            long total = 0;
            while (!deflater.finished()) {
                total += deflater.deflate(output);
            }
            deflater.end();
            sink += total;
        }
    }

    /** Reads /dev/urandom in 64 KiB blocks, forever. */
    static void readUrandomForever() {
        byte[] block = new byte[1 << 16];
        try (FileInputStream in = new FileInputStream("/dev/urandom")) {
            while (true) {
                sink += in.read(block);
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }
}
