import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;

/** Each input line: hex bytes ("-" for none); each output line: the input, a space, and the hex
 *  of new String(bytes, UTF_8) encoded back to UTF-8. */
public class JavaUtf8 {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            byte[] in = line.equals("-") ? new byte[0] : hex.parseHex(line);
            String s = new String(in, StandardCharsets.UTF_8);
            out.append(line).append(' ').append(hex.formatHex(s.getBytes(StandardCharsets.UTF_8))).append('\n');
        }
        Files.writeString(Path.of(args[1]), out.toString());
    }
}
