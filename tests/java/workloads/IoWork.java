package workloads;

import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * File and socket I/O for the io engine's tests: {@code socketReadSite} reads from a local
 * socket into which {@code socketWriteSite} writes 64 bytes every 5 ms (so each read waits
 * about 5 ms), and {@code fileWriteSite} writes 4 KiB blocks to a temporary file (fast: the
 * page cache takes them), 64 at a time, then sleeps 2 ms. Prints READY once running.
 */
public class IoWork {
    static long received;

    static int socketReadSite(InputStream in, byte[] buffer) throws Exception {
        return in.read(buffer);
    }

    static void socketWriteSite(OutputStream out, byte[] data) throws Exception {
        out.write(data);
        out.flush();
    }

    static void fileWriteSite(FileOutputStream out, byte[] block) throws Exception {
        out.write(block);
    }

    public static void main(String[] args) throws Exception {
        ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
        Socket accepted = server.accept();
        Thread reader = new Thread(() -> {
            try (InputStream in = accepted.getInputStream()) {
                byte[] buffer = new byte[64];
                while (true) {
                    int n = socketReadSite(in, buffer);
                    if (n < 0) {
                        return;
                    }
                    received += n;
                }
            } catch (Exception e) {
                e.printStackTrace();
            }
        }, "io-reader");
        reader.setDaemon(true);
        reader.start();
        Thread writer = new Thread(() -> {
            try (OutputStream out = client.getOutputStream()) {
                byte[] data = new byte[64];
                while (true) {
                    socketWriteSite(out, data);
                    Thread.sleep(5);
                }
            } catch (Exception e) {
                e.printStackTrace();
            }
        }, "io-writer");
        writer.setDaemon(true);
        writer.start();
        File file = File.createTempFile("jtap-io", ".bin");
        file.deleteOnExit();
        byte[] block = new byte[4096];
        System.out.println("READY");
        System.out.flush();
        for (long i = 0; ; i++) {
            try (FileOutputStream out = new FileOutputStream(file)) {
                for (int k = 0; k < 64; k++) {
                    fileWriteSite(out, block);
                }
            }
            Thread.sleep(2);
        }
    }
}
