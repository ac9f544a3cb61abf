package workloads;

import java.util.concurrent.atomic.LongAdder;
import java.util.zip.Deflater;

/**
 * Native allocation throughput: threads (first argument, default 2) each creating a zlib
 * {@link Deflater}, compressing 4 KiB and ending it, flat out: zlib allocates its window and
 * tables (~270 KiB) with {@code malloc}/{@code calloc} and frees them at {@code end()}. Reports
 * operations through {@link OpsReport}.
 */
public class NativeThroughput {
    static final LongAdder OPS = new LongAdder();

    static void compress() {
        byte[] input = new byte[4096];
        byte[] output = new byte[8192];
        for (int i = 0; i < input.length; i++) {
            input[i] = (byte) (i * 31 % 251);
        }
        while (true) {
            Deflater deflater = new Deflater(1);
            deflater.setInput(input);
            deflater.finish();
            deflater.deflate(output);
            deflater.end();
            OPS.increment();
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        OpsReport.run(threads, "deflate", NativeThroughput::compress, OPS);
    }
}
