package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/cryptobyte"
)

const (
	recordTypeHandshake      = 22
	handshakeTypeClientHello = 1
	extensionServerName      = 0
	serverNameTypeHostName   = 0
	// maxRecordLength is TLS's limit on a plaintext record's fragment.
	maxRecordLength = 1 << 14
	// maxClientHello bounds the handshake message the gateway reassembles;
	// real ones, post-quantum key shares included, stay under a few KiB.
	maxClientHello = 1 << 16
)

var errMalformedClientHello = errors.New("malformed ClientHello")

// readClientHello reads the TLS records that carry a ClientHello from r,
// which starts with a handshake record, and returns their raw bytes (the
// upstream still has to receive them) and the server name the hello asks
// for, "" when it names none. The hello may span several records.
func readClientHello(r io.Reader) (raw []byte, serverName string, err error) {
	var msg []byte // the handshake message, reassembled from the records' fragments
	for {
		start := len(raw)
		raw = append(raw, make([]byte, 5)...)
		if _, err := io.ReadFull(r, raw[start:]); err != nil {
			return nil, "", err
		}
		contentType, length := raw[start], int(binary.BigEndian.Uint16(raw[start+3:]))
		if contentType != recordTypeHandshake {
			return nil, "", fmt.Errorf("a record of type %d came before the ClientHello was complete", contentType)
		}
		if length == 0 || length > maxRecordLength {
			return nil, "", fmt.Errorf("a handshake record of %d bytes", length)
		}
		raw = append(raw, make([]byte, length)...)
		if _, err := io.ReadFull(r, raw[start+5:]); err != nil {
			return nil, "", err
		}
		msg = append(msg, raw[start+5:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeTypeClientHello {
			return nil, "", fmt.Errorf("handshake message of type %d, not a ClientHello", msg[0])
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxClientHello {
			return nil, "", fmt.Errorf("a ClientHello of %d bytes", size)
		}
		if len(msg) >= 4+size {
			serverName, err := parseServerName(msg[4 : 4+size])
			return raw, serverName, err
		}
	}
}

// parseServerName returns the host name of a ClientHello body's
// server_name extension. It is strict where servers are strict (a second
// server_name extension, a second host name, an empty one), so that no
// hello it reads one way reaches a server that reads it another.
func parseServerName(body []byte) (string, error) {
	s := cryptobyte.String(body)
	var sessionID, cipherSuites, compressionMethods cryptobyte.String
	if !s.Skip(2+32) || // legacy_version, random
		!s.ReadUint8LengthPrefixed(&sessionID) ||
		!s.ReadUint16LengthPrefixed(&cipherSuites) ||
		!s.ReadUint8LengthPrefixed(&compressionMethods) {
		return "", errMalformedClientHello
	}
	if s.Empty() {
		return "", nil // a hello without extensions (TLS 1.2 and older allow it)
	}
	var extensions cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&extensions) || !s.Empty() {
		return "", errMalformedClientHello
	}
	name, seen := "", false
	for !extensions.Empty() {
		var extension uint16
		var data cryptobyte.String
		if !extensions.ReadUint16(&extension) || !extensions.ReadUint16LengthPrefixed(&data) {
			return "", errMalformedClientHello
		}
		if extension != extensionServerName {
			continue
		}
		if seen {
			return "", errors.New("two server_name extensions")
		}
		seen = true
		var list cryptobyte.String
		if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
			return "", errMalformedClientHello
		}
		for !list.Empty() {
			var nameType uint8
			var hostName cryptobyte.String
			if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&hostName) {
				return "", errMalformedClientHello
			}
			if nameType != serverNameTypeHostName {
				continue
			}
			if name != "" || len(hostName) == 0 {
				return "", errors.New("server_name holds an empty or second host name")
			}
			name = string(hostName)
		}
	}
	return name, nil
}
